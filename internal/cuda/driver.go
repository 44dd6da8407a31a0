package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// driver holds the loaded library and the address of every entry point.
type driver struct {
	lib uintptr

	cuInit, cuDriverGetVersion                                  uintptr
	cuGetErrorName, cuGetErrorString                            uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName              uintptr
	cuDeviceGetAttribute, cuDeviceTotalMem                      uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease         uintptr
	cuDevicePrimaryCtxReset                                     uintptr
	cuCtxSetCurrent, cuCtxSynchronize                           uintptr
	cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH           uintptr
	cuMemsetD32, cuMemGetInfo, cuMemcpyDtoDAsync                uintptr
	cuModuleLoadDataEx, cuModuleUnload                          uintptr
	cuModuleGetFunction, cuFuncSetAttribute, cuFuncGetAttribute uintptr
	cuLaunchKernel                                              uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize        uintptr
	cuStreamGetCtx, cuPointerGetAttributes                      uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize            uintptr
	cuEventElapsedTime, cuEventDestroy                          uintptr
	elapsedName                                                 string

	// CUDA IPC (ipc.go), bound on first use: a driver without it (Windows
	// answers CUDA_ERROR_NOT_SUPPORTED) must not stop the rest.
	ipcOnce             sync.Once
	ipcOpen             func(p *uint64, h ipcHandle, flags uint32) int32 // cuIpcOpenMemHandle: the handle by value
	cuIpcGetMemHandle   uintptr
	cuIpcCloseMemHandle uintptr
	ipcErr              error

	// TMA tensor maps (tensormap.go), bound on first use as IPC.
	tmapOnce               sync.Once
	cuTensorMapEncodeTiled uintptr
	tmapErr                error

	// Stream gates (gate.go), bound on first use as IPC.
	gateOnce                                  sync.Once
	cuMemHostAlloc, cuMemHostGetDevicePointer uintptr
	cuMemFreeHost, cuStreamWaitValue32        uintptr
	gateErr                                   error
}

// symbol is one entry point: the exported names to try in order (the first
// found is bound) and where its address goes.
type symbol struct {
	names []string
	addr  *uintptr
}

func (d *driver) symbols() []symbol {
	s := func(p *uintptr, names ...string) symbol { return symbol{names, p} }
	return []symbol{
		s(&d.cuInit, "cuInit"),
		s(&d.cuDriverGetVersion, "cuDriverGetVersion"),
		s(&d.cuGetErrorName, "cuGetErrorName"),
		s(&d.cuGetErrorString, "cuGetErrorString"),
		s(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		s(&d.cuDeviceGet, "cuDeviceGet"),
		s(&d.cuDeviceGetName, "cuDeviceGetName"),
		s(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		s(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		s(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		s(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		s(&d.cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset_v2"),
		s(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		s(&d.cuCtxSynchronize, "cuCtxSynchronize"),
		s(&d.cuMemAlloc, "cuMemAlloc_v2"),
		s(&d.cuMemFree, "cuMemFree_v2"),
		s(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
		s(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
		s(&d.cuMemsetD32, "cuMemsetD32_v2"),
		s(&d.cuMemGetInfo, "cuMemGetInfo_v2"),
		s(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		s(&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"),
		s(&d.cuModuleUnload, "cuModuleUnload"),
		s(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		s(&d.cuFuncSetAttribute, "cuFuncSetAttribute"),
		s(&d.cuFuncGetAttribute, "cuFuncGetAttribute"),
		s(&d.cuLaunchKernel, "cuLaunchKernel"),
		s(&d.cuStreamCreate, "cuStreamCreate"),
		s(&d.cuStreamDestroy, "cuStreamDestroy_v2"),
		s(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		s(&d.cuStreamGetCtx, "cuStreamGetCtx"),
		s(&d.cuPointerGetAttributes, "cuPointerGetAttributes"),
		s(&d.cuEventCreate, "cuEventCreate"),
		s(&d.cuEventRecord, "cuEventRecord"),
		s(&d.cuEventSynchronize, "cuEventSynchronize"),
		// CUDA 12.8 added cuEventElapsedTime_v2; older drivers have only
		// the original, which has the same signature.
		s(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		s(&d.cuEventDestroy, "cuEventDestroy_v2"),
	}
}

// LibraryEnv names the environment variable that gives the driver
// library's path, for a machine whose loader path does not reach it.
const LibraryEnv = "GOFLASH_LIBCUDA"

// libraryPaths are where get looks for the driver library, in order:
// LibraryEnv's path alone when it is set, else the library by name (the
// loader's path: LD_LIBRARY_PATH, the ldconfig cache), then libraryDirs,
// where hosted runtimes and containers keep it (a launcher that drops
// LD_LIBRARY_PATH leaves those unreached by name).
func libraryPaths(getenv func(string) string) []string {
	if p := getenv(LibraryEnv); p != "" {
		return []string{p}
	}
	out := []string{libraryName}
	for _, d := range libraryDirs {
		out = append(out, filepath.Join(d, libraryName))
	}
	return out
}

// load opens the first of paths that opens, binds every entry point and
// calls cuInit. Errors wrap ErrNoDriver (or ErrNoDevice when the driver
// works but sees no device).
func load(paths ...string) (*driver, error) {
	var lib uintptr
	var path string
	var why []string
	for _, p := range paths {
		l, err := openLibrary(p)
		if err == nil {
			lib, path = l, p
			break
		}
		why = append(why, err.Error())
	}
	if lib == 0 {
		msg := fmt.Sprintf("cannot load %s: %s", paths[0], why[0])
		if len(paths) > 1 { // the others are where-else: one line, not every loader message
			dirs := make([]string, len(paths)-1)
			for i, p := range paths[1:] {
				dirs[i] = filepath.Dir(p)
			}
			msg += fmt.Sprintf("; nor from %s (%s names another path)", strings.Join(dirs, ", "), LibraryEnv)
		}
		return nil, fmt.Errorf("%w: %s", ErrNoDriver, msg)
	}
	d := &driver{lib: lib}
	for _, s := range d.symbols() {
		for _, n := range s.names {
			if p, err := lookupSymbol(lib, n); err == nil && p != 0 {
				*s.addr = p
				if s.addr == &d.cuEventElapsedTime {
					d.elapsedName = n
				}
				break
			}
		}
		if *s.addr == 0 {
			closeLibrary(lib)
			return nil, fmt.Errorf("%w: %s does not export %s (driver too old?)", ErrNoDriver, path, s.names[0])
		}
	}
	if err := d.check("cuInit", d.call(d.cuInit, 0)); err != nil {
		if errors.Is(err, ErrNoDevice) {
			if v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); set {
				return nil, fmt.Errorf("%w (CUDA_VISIBLE_DEVICES=%q: the driver shows only the devices it names)", err, v)
			}
			return nil, err
		}
		// A driver library without its kernel module (or a broken install)
		// fails here, with CUDA_ERROR_UNKNOWN or CUDA_ERROR_OPERATING_SYSTEM
		// among others: for the caller it is all "no usable driver".
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	return d, nil
}

var (
	defaultOnce sync.Once
	defaultDrv  *driver
	defaultErr  error
)

// get returns the process-wide driver, loading it on first use. A failure
// is remembered: a driver does not appear while a process runs.
func get() (*driver, error) {
	defaultOnce.Do(func() { defaultDrv, defaultErr = load(libraryPaths(os.Getenv)...) })
	return defaultDrv, defaultErr
}

// Init loads the driver and initialises it. Every other entry point calls it;
// calling it first only moves the cost (a few milliseconds to seconds on
// the first use of a GPU) to a time of the caller's choosing.
func Init() error {
	_, err := get()
	return err
}

// call runs one driver entry point. The result is the low 32 bits of the
// return register: CUresult is a C enum and the upper bits are undefined.
//
//go:uintptrescapes
func (d *driver) call(fn uintptr, args ...uintptr) Result {
	r := syscallN(fn, args...)
	return Result(int32(uint32(r)))
}

// check turns a CUresult into nil or an *Error named after fn.
func (d *driver) check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Func: fn, Code: r, Name: "CUDA_ERROR_UNRECOGNIZED", Message: "unrecognized error code"}
	var p *byte
	if d.call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))) == Success && p != nil {
		e.Name = cString(p)
	}
	p = nil
	if d.call(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&p))) == Success && p != nil {
		e.Message = cString(p)
	}
	return e
}

// cString copies a NUL-terminated C string owned by the driver.
func cString(p *byte) string {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.call(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}
