package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// FuncAttr is a CUfunction_attribute.
type FuncAttr int32

// Function attributes used by GoFlash.
const (
	FuncLocalSizeBytes      FuncAttr = 3 // local memory per thread (spills, stack)
	FuncNumRegs             FuncAttr = 4
	FuncBinaryVersion       FuncAttr = 6 // SASS architecture the function runs as, e.g. 90
	FuncMaxDynamicSharedMem FuncAttr = 8
)

// Module is a loaded fatbin, cubin or PTX image.
type Module struct {
	c *Context
	h uintptr // CUmodule

	mu       sync.Mutex
	unloaded bool
}

// CUjit_option values for the JIT's error log.
const (
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
)

// LoadModule loads a fatbin, cubin or PTX image. PTX is compiled by the
// driver's JIT; its error log, if any, is part of the returned error.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: LoadModule of an empty image")
	}
	// PTX is read as a C string: give it a terminating NUL. Binary images
	// carry their own size and are passed as they are.
	img := image
	if image[len(image)-1] != 0 && !isBinaryImage(image) {
		img = append(append(make([]byte, 0, len(image)+1), image...), 0)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	logBuf := make([]byte, 16<<10)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferBytes}
	// optionValues is a void* array: a pointer to the log, then its size
	// stored in a pointer-sized slot (the driver writes back the used size).
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	pin.Pin(&img[0])
	pin.Pin(&logBuf[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	m := &Module{c: c}
	err := c.do("cuModuleLoadDataEx", c.d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	if err != nil {
		if log := strings.TrimSpace(string(bytes.TrimRight(logBuf, "\x00"))); log != "" {
			return nil, fmt.Errorf("%w; JIT log: %s", err, log)
		}
		return nil, err
	}
	if err := track(c, c.modules, m, true); err != nil {
		return nil, err
	}
	return m, nil
}

// isBinaryImage reports an ELF cubin or a fatbin (magic 0xBA55ED50).
func isBinaryImage(b []byte) bool {
	return bytes.HasPrefix(b, []byte("\x7fELF")) || bytes.HasPrefix(b, []byte{0x50, 0xed, 0x55, 0xba})
}

// Unload releases the module; its functions become unusable. A second
// Unload returns nil.
func (m *Module) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unloaded {
		return nil
	}
	if err := m.c.do("cuModuleUnload", m.c.d.cuModuleUnload, m.h); err != nil {
		return err
	}
	m.unloaded = true
	return track(m.c, m.c.modules, m, false)
}

// Function is one kernel of a module.
type Function struct {
	m    *Module
	h    uintptr // CUfunction
	name string
}

// Function looks up a kernel by its symbol name (extern "C" or mangled).
func (m *Module) Function(name string) (*Function, error) {
	m.mu.Lock()
	unloaded := m.unloaded
	m.mu.Unlock()
	if unloaded {
		return nil, ErrClosed
	}
	f := &Function{m: m, name: name}
	cname := append([]byte(name), 0)
	if err := m.c.do("cuModuleGetFunction", m.c.d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		return nil, fmt.Errorf("%w (symbol %q)", err, name)
	}
	return f, nil
}

// Name is the kernel's symbol.
func (f *Function) Name() string { return f.name }

// Attribute reads one function attribute.
func (f *Function) Attribute(a FuncAttr) (int, error) {
	var v int32
	if err := f.m.c.do("cuFuncGetAttribute", f.m.c.d.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), f.h); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetMaxDynamicSharedMem allows launches with up to bytes of dynamic shared
// memory; above 48 KiB the driver refuses launches without it.
func (f *Function) SetMaxDynamicSharedMem(bytes int) error {
	return f.m.c.do("cuFuncSetAttribute", f.m.c.d.cuFuncSetAttribute, f.h, uintptr(FuncMaxDynamicSharedMem), uintptr(bytes))
}

// Args is the parameter block of a kernel: one pointer per parameter, to
// that parameter's value. It can be built once and reused by many launches
// with new values: the driver copies the values at launch time.
type Args struct {
	ptrs []unsafe.Pointer

	// argv is the driver call's own argument array, reused by every
	// launch: purego's variadic arguments escape, so a fresh one would be
	// an allocation per launch.
	mu   sync.Mutex
	argv [11]uintptr
}

// NewArgs makes a parameter block from pointers to Go values of the kernel
// parameters' exact C layouts. The values must stay valid (not freed or on
// a stack that may move): allocate them with new or in a struct.
func NewArgs(vals ...unsafe.Pointer) *Args {
	return &Args{ptrs: append([]unsafe.Pointer(nil), vals...)}
}

// LaunchConfig is a kernel's grid, block and dynamic shared memory.
type LaunchConfig struct {
	Grid, Block [3]uint32
	SharedMem   uint32
}

// Launch enqueues f on stream s (nil: the legacy default stream).
func (f *Function) Launch(cfg LaunchConfig, s *Stream, a *Args) error {
	var sh uintptr
	if s != nil {
		sh = s.h
	}
	return f.LaunchOn(cfg, sh, a)
}

// LaunchOn enqueues f on the stream whose CUstream handle is h (0: the
// legacy default stream), which may belong to another user of the context.
func (f *Function) LaunchOn(cfg LaunchConfig, h uintptr, a *Args) error {
	// The values and the pointer array are pinned for the call. Pinning
	// only while the driver reads them (not for the life of Args) means a
	// forgotten Args cannot trip the runtime's leaked-pin check.
	var pin runtime.Pinner
	defer pin.Unpin()
	if a == nil {
		a = &Args{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var kp uintptr
	if len(a.ptrs) > 0 {
		for _, v := range a.ptrs {
			pin.Pin(v)
		}
		pin.Pin(&a.ptrs[0])
		kp = uintptr(unsafe.Pointer(&a.ptrs[0]))
	}
	a.argv = [11]uintptr{f.h,
		uintptr(cfg.Grid[0]), uintptr(cfg.Grid[1]), uintptr(cfg.Grid[2]),
		uintptr(cfg.Block[0]), uintptr(cfg.Block[1]), uintptr(cfg.Block[2]),
		uintptr(cfg.SharedMem), h, kp, 0}
	return f.m.c.do("cuLaunchKernel", f.m.c.d.cuLaunchKernel, a.argv[:]...)
}

// LaunchBound is one cuLaunchKernel and nothing else: no context switch,
// no pinning (the values of a, from NewArgs, are heap objects and a is
// kept alive by the caller). The calling goroutine must have made the
// context current with Bind. Benchmarks use it to time the driver's own
// cost of a launch against the full path of LaunchOn.
func (f *Function) LaunchBound(cfg LaunchConfig, h uintptr, a *Args) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var kp uintptr
	if len(a.ptrs) > 0 {
		kp = uintptr(unsafe.Pointer(&a.ptrs[0]))
	}
	a.argv = [11]uintptr{f.h,
		uintptr(cfg.Grid[0]), uintptr(cfg.Grid[1]), uintptr(cfg.Grid[2]),
		uintptr(cfg.Block[0]), uintptr(cfg.Block[1]), uintptr(cfg.Block[2]),
		uintptr(cfg.SharedMem), h, kp, 0}
	return f.m.c.d.check("cuLaunchKernel", f.m.c.d.call(f.m.c.d.cuLaunchKernel, a.argv[:]...))
}
