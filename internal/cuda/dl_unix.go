//go:build linux && (amd64 || arm64)

package cuda

import "github.com/goflash/goflash/internal/dl"

const libraryName = "libcuda.so.1"

// libraryDirs hold the driver library on Colab (/usr/lib64-nvidia), in the
// NVIDIA container runtime's images (Kaggle: /usr/local/nvidia/lib64), on
// WSL and in Debian/Ubuntu's multiarch directories.
var libraryDirs = []string{"/usr/lib64-nvidia", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib",
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}

// The loading itself is internal/dl's, shared with internal/nvrtc.
func openLibrary(path string) (uintptr, error) { return dl.Open(path) }

func lookupSymbol(lib uintptr, name string) (uintptr, error) { return dl.Sym(lib, name) }

func closeLibrary(lib uintptr) { dl.Close(lib) }

func registerFunc(fptr any, fn uintptr) { dl.RegisterFunc(fptr, fn) }

//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) uintptr { return dl.Call(fn, args...) }
