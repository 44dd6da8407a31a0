//go:build linux && (amd64 || arm64)

package cuda

import "github.com/ebitengine/purego"

const libraryName = "libcuda.so.1"

// libraryDirs hold the driver library on Colab (/usr/lib64-nvidia), in the
// NVIDIA container runtime's images (Kaggle: /usr/local/nvidia/lib64), on
// WSL and in Debian/Ubuntu's multiarch directories.
var libraryDirs = []string{"/usr/lib64-nvidia", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib",
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}

func openLibrary(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func lookupSymbol(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

func closeLibrary(lib uintptr) { _ = purego.Dlclose(lib) }

// registerFunc makes fptr call the C function at fn, with purego's ABI
// handling (for arguments SyscallN cannot pass: structs by value).
func registerFunc(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }

//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
