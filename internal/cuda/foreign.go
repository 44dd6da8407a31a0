package cuda

import "unsafe"

// What a raw call needs to use memory and streams it did not create: the
// stream's context and the allocation a device address lies in. Both answer
// through a caller-owned Probe, so that a query allocates nothing.

// Handle is the stream's CUstream, for callers that pass it on.
func (s *Stream) Handle() uintptr { return s.h }

// CUpointer_attribute values read by AddressRange.
const (
	attrDeviceOrdinal  = 9
	attrRangeStartAddr = 11
	attrRangeSize      = 12
)

// Probe is storage for the driver's answers to StreamContext and
// AddressRange, reused by every query; one Probe serves one caller at a
// time.
type Probe struct {
	ctx     uintptr
	start   uint64
	size    uint64
	ordinal int32
	attrs   [3]int32
	data    [3]uintptr // where the driver writes each attribute
	argv    [4]uintptr // the driver call's argument array (see Args.argv)
}

// NewProbe makes a Probe.
func NewProbe() *Probe {
	p := &Probe{attrs: [3]int32{attrRangeStartAddr, attrRangeSize, attrDeviceOrdinal}}
	p.data = [3]uintptr{uintptr(unsafe.Pointer(&p.start)), uintptr(unsafe.Pointer(&p.size)), uintptr(unsafe.Pointer(&p.ordinal))}
	return p
}

// OwnsStream reports whether the stream with handle h belongs to c. The
// legacy default stream (0, CU_STREAM_LEGACY) and the per-thread stream
// (CU_STREAM_PER_THREAD) belong to whichever context is current, so to c.
// h must be a live stream: the driver may crash on a destroyed one.
func (c *Context) OwnsStream(h uintptr, p *Probe) (bool, error) {
	p.ctx = 0
	p.argv[0], p.argv[1] = h, uintptr(unsafe.Pointer(&p.ctx))
	if err := c.do("cuStreamGetCtx", c.d.cuStreamGetCtx, p.argv[:2]...); err != nil {
		return false, err
	}
	return p.ctx == c.ctx, nil
}

// AddressRange returns the allocation that device address ptr lies in (its
// start and size in bytes) and the ordinal of the device that holds it.
// An address no CUDA allocation holds gives size 0 and no error.
func (c *Context) AddressRange(ptr uint64, p *Probe) (start, size uint64, ordinal int, err error) {
	p.start, p.size, p.ordinal = 0, 0, -1
	p.argv = [4]uintptr{uintptr(len(p.attrs)), uintptr(unsafe.Pointer(&p.attrs[0])), uintptr(unsafe.Pointer(&p.data[0])), uintptr(ptr)}
	if err := c.do("cuPointerGetAttributes", c.d.cuPointerGetAttributes, p.argv[:]...); err != nil {
		return 0, 0, 0, err
	}
	return p.start, p.size, int(p.ordinal), nil
}

// Bind locks the calling goroutine to its OS thread and makes c current
// there, for LaunchBound; Unbind undoes it.
func (c *Context) Bind() error { return c.enter() }

// Unbind ends what Bind began.
func (c *Context) Unbind() { c.exit() }
