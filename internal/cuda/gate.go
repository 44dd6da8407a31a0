package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// A Gate holds a stream's later work until the host opens it: the stream
// waits (cuStreamWaitValue32) for a 32-bit word of pinned host memory,
// mapped for the device, to reach the value that Open writes. A benchmark
// holds the stream, enqueues its start event, the kernels and the stop
// event, then opens it: the events bracket the kernels alone, not the
// host's enqueue between them (on an idle GPU the start event would
// otherwise run at once and the first kernel only when its launch arrives).
type Gate struct {
	c    *Context
	host unsafe.Pointer // the pinned word
	dev  uint64         // its device address
	gen  uint32         // the value the stream waits for next

	held, destroyed bool
}

const (
	memHostAllocPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	memHostAllocDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	streamWaitValueGEQ    = 0x0  // CU_STREAM_WAIT_VALUE_GEQ
)

// bindGate binds the gate's entry points once.
func (d *driver) bindGate() error {
	d.gateOnce.Do(func() {
		for _, e := range []struct {
			addr  *uintptr
			names []string
		}{
			{&d.cuMemHostAlloc, []string{"cuMemHostAlloc"}},
			{&d.cuMemHostGetDevicePointer, []string{"cuMemHostGetDevicePointer_v2"}},
			{&d.cuMemFreeHost, []string{"cuMemFreeHost"}},
			{&d.cuStreamWaitValue32, []string{"cuStreamWaitValue32_v2", "cuStreamWaitValue32"}},
		} {
			for _, n := range e.names {
				if p, err := lookupSymbol(d.lib, n); err == nil && p != 0 {
					*e.addr = p
					break
				}
			}
			if *e.addr == 0 {
				d.gateErr = fmt.Errorf("%w: the driver does not export %s", ErrNoDriver, e.names[0])
				return
			}
		}
	})
	return d.gateErr
}

// NewGate allocates a gate's pinned word. A driver or device without
// stream memory operations is an error here or at the first Hold; callers
// then time without one. Destroy frees it.
func (c *Context) NewGate() (*Gate, error) {
	if err := c.d.bindGate(); err != nil {
		return nil, err
	}
	g := &Gate{c: c}
	if err := c.do("cuMemHostAlloc", c.d.cuMemHostAlloc, uintptr(unsafe.Pointer(&g.host)), 4,
		memHostAllocPortable|memHostAllocDeviceMap); err != nil {
		return nil, err
	}
	atomic.StoreUint32((*uint32)(g.host), 0)
	if err := c.do("cuMemHostGetDevicePointer_v2", c.d.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&g.dev)),
		uintptr(g.host), 0); err != nil {
		_ = c.do("cuMemFreeHost", c.d.cuMemFreeHost, uintptr(g.host))
		return nil, err
	}
	return g, nil
}

// Hold makes s wait, from here, until Open. Every successful Hold must be
// followed by Open, or s never runs again.
func (g *Gate) Hold(s *Stream) error {
	if g.held {
		return fmt.Errorf("cuda: Gate.Hold on a held gate")
	}
	if err := g.c.do("cuStreamWaitValue32", g.c.d.cuStreamWaitValue32, s.h, uintptr(g.dev), uintptr(g.gen+1),
		streamWaitValueGEQ); err != nil {
		return err
	}
	g.gen++
	g.held = true
	return nil
}

// Open releases the stream held by the last Hold (nothing if none).
func (g *Gate) Open() {
	if g.held {
		atomic.StoreUint32((*uint32)(g.host), g.gen)
		g.held = false
	}
}

// Destroy opens the gate and frees its word once the caller has waited
// for the held stream's work; a second Destroy returns nil.
func (g *Gate) Destroy() error {
	if g.destroyed {
		return nil
	}
	g.Open()
	g.destroyed = true
	return g.c.do("cuMemFreeHost", g.c.d.cuMemFreeHost, uintptr(g.host))
}
