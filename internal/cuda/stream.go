package cuda

import (
	"sync"
	"unsafe"
)

// Stream is a CUDA stream. It is created blocking (synchronising with the
// legacy default stream), so the synchronous copies see its results.
type Stream struct {
	c *Context
	h uintptr

	mu        sync.Mutex
	destroyed bool
}

// NewStream creates a stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	if err := c.do("cuStreamCreate", c.d.cuStreamCreate, uintptr(unsafe.Pointer(&s.h)), 0); err != nil {
		return nil, err
	}
	if err := track(c, c.streams, s, true); err != nil {
		return nil, err
	}
	return s, nil
}

// Synchronize waits for the stream's work.
func (s *Stream) Synchronize() error {
	return s.c.do("cuStreamSynchronize", s.c.d.cuStreamSynchronize, s.h)
}

// Destroy releases the stream; a second Destroy returns nil.
func (s *Stream) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return nil
	}
	if err := s.c.do("cuStreamDestroy_v2", s.c.d.cuStreamDestroy, s.h); err != nil {
		return err
	}
	s.destroyed = true
	return track(s.c, s.c.streams, s, false)
}

// Event is a CUDA event, for timing.
type Event struct {
	c *Context
	h uintptr

	mu        sync.Mutex
	destroyed bool
}

// NewEvent creates a timing event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	if err := c.do("cuEventCreate", c.d.cuEventCreate, uintptr(unsafe.Pointer(&e.h)), 0); err != nil {
		return nil, err
	}
	if err := track(c, c.events, e, true); err != nil {
		return nil, err
	}
	return e, nil
}

// Record enqueues the event on s (nil: the legacy default stream).
func (e *Event) Record(s *Stream) error {
	var sh uintptr
	if s != nil {
		sh = s.h
	}
	return e.c.do("cuEventRecord", e.c.d.cuEventRecord, e.h, sh)
}

// Synchronize waits until the event has completed.
func (e *Event) Synchronize() error {
	return e.c.do("cuEventSynchronize", e.c.d.cuEventSynchronize, e.h)
}

// Destroy releases the event; a second Destroy returns nil.
func (e *Event) Destroy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return nil
	}
	if err := e.c.do("cuEventDestroy_v2", e.c.d.cuEventDestroy, e.h); err != nil {
		return err
	}
	e.destroyed = true
	return track(e.c, e.c.events, e, false)
}

// Elapsed returns the milliseconds between two completed events.
func Elapsed(start, end *Event) (float32, error) {
	var ms float32
	c := start.c
	if err := c.do(c.d.elapsedName, c.d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h); err != nil {
		return 0, err
	}
	return ms, nil
}
