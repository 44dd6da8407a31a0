//go:build linux && (amd64 || arm64)

package dl

import "github.com/ebitengine/purego"

// Supported says whether this platform can load CUDA libraries at all.
const Supported = true

// Open loads the library at path (a file, or a name the loader searches
// for), its symbols bound now and visible to libraries loaded after it.
func Open(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// Sym returns the address of an exported symbol of lib.
func Sym(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

// Close releases lib.
func Close(lib uintptr) { _ = purego.Dlclose(lib) }

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
