//go:build windows && (amd64 || arm64)

package dl

import (
	"syscall"

	"github.com/ebitengine/purego"
)

// Supported says whether this platform can load CUDA libraries at all.
const Supported = true

// Open loads the DLL at path: purego has no Dlopen on Windows, so the
// standard library loads it and purego makes the calls.
func Open(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	return uintptr(h), err
}

// Sym returns the address of an exported symbol of lib.
func Sym(lib uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(lib), name)
}

// Close releases lib.
func Close(lib uintptr) { _ = syscall.FreeLibrary(syscall.Handle(lib)) }

// RegisterFunc makes fptr call the C function at fn, with purego's ABI
// handling (for arguments Call cannot pass: structs by value).
func RegisterFunc(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }

// Call calls the C function at fn with integer and pointer arguments and
// returns its integer result register.
//
//go:uintptrescapes
func Call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
