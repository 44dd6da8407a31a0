//go:build windows && (amd64 || arm64)

package cuda

import "github.com/goflash/goflash/internal/dl"

const libraryName = "nvcuda.dll"

// libraryDirs: the loader's search by name is all there is here.
var libraryDirs []string

// The loading itself is internal/dl's, shared with internal/nvrtc.
func openLibrary(path string) (uintptr, error) { return dl.Open(path) }

func lookupSymbol(lib uintptr, name string) (uintptr, error) { return dl.Sym(lib, name) }

func closeLibrary(lib uintptr) { dl.Close(lib) }

func registerFunc(fptr any, fn uintptr) { dl.RegisterFunc(fptr, fn) }

//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) uintptr { return dl.Call(fn, args...) }
