package cuda

import (
	"testing"
	"unsafe"
)

// TestGPUForeignQueries: the stream and pointer queries a raw call makes
// about memory and streams it did not create.
func TestGPUForeignQueries(t *testing.T) {
	c := gpu(t)
	p := NewProbe()
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []uintptr{s.Handle(), 0, 1, 2} { // own, legacy (0 and CU_STREAM_LEGACY), per-thread
		if own, err := c.OwnsStream(h, p); err != nil || !own {
			t.Errorf("OwnsStream(%#x) = %v, %v; want true", h, own, err)
		}
	}
	b, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	start, size, ord, err := c.AddressRange(b.Ptr()+4096, p)
	if err != nil || start != b.Ptr() || size < uint64(b.Size()) || ord != c.Ordinal() {
		t.Errorf("AddressRange inside a buffer: start %#x size %d ordinal %d %v; want %#x, >= %d, %d", start, size, ord, err, b.Ptr(), b.Size(), c.Ordinal())
	}
	if _, size, _, err := c.AddressRange(1<<44, p); err != nil || size != 0 {
		t.Errorf("AddressRange of an address no allocation holds: size %d %v; want 0, nil", size, err)
	}
	if n, _ := DeviceCount(); n > 1 {
		c1, err := Open(1)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c1.Close(); err != nil {
				t.Error(err)
			}
		}()
		s1, err := c1.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if own, err := c.OwnsStream(s1.Handle(), p); err != nil || own {
			t.Errorf("OwnsStream(stream of device 1) = %v, %v; want false", own, err)
		}
		b1, err := c1.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ord, err := c.AddressRange(b1.Ptr(), p); err != nil || ord != 1 {
			t.Errorf("AddressRange of device 1 memory: ordinal %d %v; want 1", ord, err)
		}
	} else {
		t.Log("one GPU: the other-context checks need two")
	}
}

// TestGPULaunchAllocs: a launch, the context switch included, allocates
// nothing on the Go heap (the driver's argument arrays are reused).
func TestGPULaunchAllocs(t *testing.T) {
	c := gpu(t)
	m := testModule(t, c)
	f, err := m.Function("empty")
	if err != nil {
		t.Fatal(err)
	}
	a := NewArgs(unsafe.Pointer(&echoParams{}))
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handle()
	if n := testing.AllocsPerRun(200, func() {
		if err := f.LaunchOn(oneBlock, h, a); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per launch, want 0", n)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}
