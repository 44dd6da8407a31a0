//go:build !linux

package flashattn

// addressSpaceLimit: RLIMIT_AS is read on Linux only.
func addressSpaceLimit() (int64, bool) { return 0, false }
