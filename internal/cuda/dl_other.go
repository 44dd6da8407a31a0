//go:build !((linux && (amd64 || arm64)) || (windows && (amd64 || arm64)))

package cuda

import (
	"fmt"
	"runtime"
)

// CUDA drivers exist only for Linux and Windows on amd64 and arm64.
const libraryName = "libcuda"

// libraryDirs: the loader's search by name is all there is here.
var libraryDirs []string

func openLibrary(string) (uintptr, error) {
	return 0, fmt.Errorf("no CUDA driver exists for %s/%s", runtime.GOOS, runtime.GOARCH)
}

func lookupSymbol(uintptr, string) (uintptr, error) { return 0, fmt.Errorf("no library") }

func closeLibrary(uintptr) {}

func syscallN(uintptr, ...uintptr) uintptr { return uintptr(ErrNotInitialized) }

func registerFunc(any, uintptr) {}
