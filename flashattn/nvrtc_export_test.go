package flashattn

import "github.com/goflash/goflash/internal/nvrtc"

// UseNVRTCCache makes the rung compiles go through a new cache in dir (""
// memory only) until the returned function restores the process's; it
// returns the cache, whose Compiles count NVRTC's runs.
func UseNVRTCCache(dir string) (*nvrtc.Cache, func()) {
	nvrtcCache()
	old := rungCache.c
	c := nvrtc.NewCache(dir)
	rungCache.c = c
	return c, func() { rungCache.c = old }
}
