//go:build windows && (amd64 || arm64)

package cuda

import (
	"syscall"

	"github.com/ebitengine/purego"
)

// purego has no Dlopen on Windows; the standard library loads the DLL and
// purego makes the calls.
const libraryName = "nvcuda.dll"

// libraryDirs: the loader's search by name is all there is here.
var libraryDirs []string

func openLibrary(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	return uintptr(h), err
}

func lookupSymbol(lib uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(lib), name)
}

func closeLibrary(lib uintptr) { _ = syscall.FreeLibrary(syscall.Handle(lib)) }

// registerFunc makes fptr call the C function at fn, with purego's ABI
// handling (for arguments SyscallN cannot pass: structs by value).
func registerFunc(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }

//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
