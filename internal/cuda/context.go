package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// DeviceAttr is a CUdevice_attribute.
type DeviceAttr int32

// Device attributes used by GoFlash.
const (
	AttrMaxGridDimY          DeviceAttr = 6
	AttrMultiprocessorCount  DeviceAttr = 16
	AttrComputeCapMajor      DeviceAttr = 75
	AttrComputeCapMinor      DeviceAttr = 76
	AttrMaxSharedPerBlockOpt DeviceAttr = 97
	AttrMaxSharedPerSM       DeviceAttr = 81
)

// Context is a retained primary context of one device, and the owner of
// everything allocated through it.
type Context struct {
	d       *driver
	ordinal int
	dev     int32      // CUdevice
	ctx     uintptr    // CUcontext
	current [1]uintptr // cuCtxSetCurrent's argument array, reused: see Args.argv

	mu      sync.Mutex
	closed  bool
	lost    error // the kernel fault that made the context unusable, if any
	buffers map[*Buffer]struct{}
	modules map[*Module]struct{}
	streams map[*Stream]struct{}
	events  map[*Event]struct{}
}

// Open retains the primary context of device ordinal. Errors wrap
// ErrNoDriver or ErrNoDevice when there is nothing to open.
func Open(ordinal int) (*Context, error) {
	d, err := get()
	if err != nil {
		return nil, err
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device %d asked for, the driver sees %d", ErrNoDevice, ordinal, n)
	}
	c := &Context{d: d, ordinal: ordinal,
		buffers: map[*Buffer]struct{}{}, modules: map[*Module]struct{}{},
		streams: map[*Stream]struct{}{}, events: map[*Event]struct{}{}}
	if err := d.check("cuDeviceGet", d.call(d.cuDeviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev))); err != nil {
		if errors.Is(err, ErrContextLost) {
			return nil, fmt.Errorf("cuda: device %d: %w (an earlier kernel fault in this process); %v", ordinal, ErrContextLost, err)
		}
		return nil, err
	}
	c.current[0] = c.ctx
	return c, nil
}

// Ordinal is the device's index.
func (c *Context) Ordinal() int { return c.ordinal }

// enter locks the goroutine to its OS thread and makes the context current
// there; every successful enter is paired with exit.
func (c *Context) enter() error {
	c.mu.Lock()
	closed, lost := c.closed, c.lost
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if lost != nil {
		// Fail at once: the driver would answer the same, and a faulted
		// context is no place to queue more work.
		return fmt.Errorf("cuda: device %d: %w; earlier: %v", c.ordinal, ErrContextLost, lost)
	}
	runtime.LockOSThread()
	if err := c.d.check("cuCtxSetCurrent", c.d.call(c.d.cuCtxSetCurrent, c.current[:]...)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func (c *Context) exit() { runtime.UnlockOSThread() }

// do runs one driver call with the context current.
//
//go:uintptrescapes
func (c *Context) do(name string, fn uintptr, args ...uintptr) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(fn, args...)
	c.exit()
	err := c.d.check(name, r)
	if errors.Is(err, ErrContextLost) {
		c.mu.Lock()
		if c.lost == nil {
			c.lost = err
		}
		c.mu.Unlock()
	}
	return err
}

// Close synchronizes the device, releases every buffer, module, stream and
// event still alive, then the primary context. It returns the errors joined;
// a second Close returns nil. After a kernel fault (ErrContextLost) it resets
// the primary context instead (cuDevicePrimaryCtxReset, which frees what the
// context held) and releases it; every other Context of that device in the
// process shared the faulted primary context and is lost too, and the
// driver refuses a new one until the process ends (see ErrContextLost).
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	bufs, mods, strs, evs := keys(c.buffers), keys(c.modules), keys(c.streams), keys(c.events)
	lost := c.lost
	if lost != nil {
		c.closed = true
	}
	c.mu.Unlock()
	if lost != nil {
		// Nothing is freed one by one on a faulted context: the reset
		// destroys it all. It does not release; the driver allows the
		// release after it.
		return errors.Join(
			c.d.check("cuDevicePrimaryCtxReset_v2", c.d.call(c.d.cuDevicePrimaryCtxReset, uintptr(c.dev))),
			c.d.check("cuDevicePrimaryCtxRelease_v2", c.d.call(c.d.cuDevicePrimaryCtxRelease, uintptr(c.dev))))
	}

	var errs []error
	errs = append(errs, c.Synchronize())
	for _, e := range evs {
		errs = append(errs, e.Destroy())
	}
	for _, s := range strs {
		errs = append(errs, s.Destroy())
	}
	for _, b := range bufs {
		errs = append(errs, b.Free())
	}
	for _, m := range mods {
		errs = append(errs, m.Unload())
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	errs = append(errs, c.d.check("cuDevicePrimaryCtxRelease_v2", c.d.call(c.d.cuDevicePrimaryCtxRelease, uintptr(c.dev))))
	return errors.Join(errs...)
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Synchronize waits for all work on the device.
func (c *Context) Synchronize() error {
	return c.do("cuCtxSynchronize", c.d.cuCtxSynchronize)
}

// Name is the device's marketing name, e.g. "NVIDIA H200".
func (c *Context) Name() (string, error) {
	var buf [256]byte
	if err := c.d.check("cuDeviceGetName", c.d.call(c.d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)-1), uintptr(c.dev))); err != nil {
		return "", err
	}
	return cString(&buf[0]), nil
}

// Attribute reads one device attribute.
func (c *Context) Attribute(a DeviceAttr) (int, error) {
	var v int32
	if err := c.d.check("cuDeviceGetAttribute", c.d.call(c.d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(c.dev))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// ComputeCapability returns the device's major and minor compute capability.
func (c *Context) ComputeCapability() (major, minor int, err error) {
	if major, err = c.Attribute(AttrComputeCapMajor); err != nil {
		return 0, 0, err
	}
	minor, err = c.Attribute(AttrComputeCapMinor)
	return major, minor, err
}

// TotalMem is the device's memory in bytes.
func (c *Context) TotalMem() (uint64, error) {
	var n uintptr
	if err := c.d.check("cuDeviceTotalMem_v2", c.d.call(c.d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(c.dev))); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	var f, t uintptr
	if err := c.do("cuMemGetInfo_v2", c.d.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

// track registers or forgets an owned object; it fails on a closed context.
func track[T comparable](c *Context, m map[T]struct{}, x T, add bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if add {
		if c.closed {
			return ErrClosed
		}
		m[x] = struct{}{}
	} else {
		delete(m, x)
	}
	return nil
}
