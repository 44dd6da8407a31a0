//go:build !((linux && (amd64 || arm64)) || (windows && (amd64 || arm64)))

package dl

import (
	"fmt"
	"runtime"
)

// Supported says whether this platform can load CUDA libraries at all.
const Supported = false

// Open fails: CUDA's libraries exist only for Linux and Windows on amd64
// and arm64.
func Open(string) (uintptr, error) {
	return 0, fmt.Errorf("no CUDA libraries exist for %s/%s", runtime.GOOS, runtime.GOARCH)
}

// Sym fails: nothing can be opened here.
func Sym(uintptr, string) (uintptr, error) { return 0, fmt.Errorf("no library") }

// Close does nothing.
func Close(uintptr) {}

// RegisterFunc leaves fptr nil.
func RegisterFunc(any, uintptr) {}

// Call is never reached (Open fails); it returns ^0, an error code to every
// caller.
func Call(uintptr, ...uintptr) uintptr { return ^uintptr(0) }
