package cuda

import (
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// The launch-overhead benchmarks split the host cost of one launch into
// purego's call, the context handling of every Context method, and the
// driver's own cuLaunchKernel, so a regression can be placed.

// BenchmarkDriverCallRaw: one purego call of a trivial driver entry point.
func BenchmarkDriverCallRaw(b *testing.B) {
	c := gpu(b)
	var v int32
	for b.Loop() {
		c.d.call(c.d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	}
}

// BenchmarkContextCall: the same call through Context.do (lock the thread,
// cuCtxSetCurrent, call, unlock).
func BenchmarkContextCall(b *testing.B) {
	c := gpu(b)
	var v int32
	for b.Loop() {
		if err := c.do("cuDriverGetVersion", c.d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); err != nil {
			b.Fatal(err)
		}
	}
}

func emptyKernel(b *testing.B, c *Context) (*Function, *Args) {
	m, err := c.LoadModule(testPTX)
	if err != nil {
		b.Fatal(err)
	}
	f, err := m.Function("empty")
	if err != nil {
		b.Fatal(err)
	}
	return f, NewArgs(unsafe.Pointer(&echoParams{}))
}

var oneBlock = LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}

// BenchmarkLaunchEnqueue: Function.Launch of an empty kernel, waiting every
// 256 launches (the time per op is the enqueue cost while the queue is not
// full).
func BenchmarkLaunchEnqueue(b *testing.B) {
	c := gpu(b)
	f, a := emptyKernel(b, c)
	i := 0
	for b.Loop() {
		if err := f.Launch(oneBlock, nil, a); err != nil {
			b.Fatal(err)
		}
		if i++; i%256 == 0 {
			_ = c.Synchronize()
		}
	}
	_ = c.Synchronize()
}

// BenchmarkLaunchEnqueueRaw: cuLaunchKernel called directly on a locked
// thread with the context current: the driver's cost alone.
func BenchmarkLaunchEnqueueRaw(b *testing.B) {
	c := gpu(b)
	f, a := emptyKernel(b, c)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c.d.call(c.d.cuCtxSetCurrent, c.ctx)
	kp := uintptr(unsafe.Pointer(&a.ptrs[0]))
	i := 0
	for b.Loop() {
		if r := c.d.call(c.d.cuLaunchKernel, f.h, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0); r != Success {
			b.Fatal(c.d.check("cuLaunchKernel", r))
		}
		if i++; i%256 == 0 {
			c.d.call(c.d.cuCtxSynchronize)
		}
	}
	c.d.call(c.d.cuCtxSynchronize)
	runtime.KeepAlive(a)
}

// TestGPULaunchLatency logs the host wall time of record+launch+record+wait
// of an empty kernel, minus its event time, through the wrappers (no
// assertion: a measurement for the record).
func TestGPULaunchLatency(t *testing.T) {
	c := gpu(t)
	m, err := c.LoadModule(testPTX)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Function("empty")
	if err != nil {
		t.Fatal(err)
	}
	a := NewArgs(unsafe.Pointer(&echoParams{}))
	s, _ := c.NewStream()
	e0, _ := c.NewEvent()
	e1, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	for _, locked := range []bool{false, true} {
		if locked {
			runtime.LockOSThread()
		}
		var wall, ev, enq []float64
		for i := range 200 {
			t0 := time.Now()
			err := e0.Record(s)
			t1 := time.Now()
			err2 := f.Launch(oneBlock, s, a)
			t2 := time.Now()
			err3 := e1.Record(s)
			err4 := e1.Synchronize()
			w := time.Since(t0)
			if err != nil || err2 != nil || err3 != nil || err4 != nil {
				t.Fatal(err, err2, err3, err4)
			}
			ms, err := Elapsed(e0, e1)
			if err != nil {
				t.Fatal(err)
			}
			if i >= 20 {
				wall = append(wall, float64(w.Nanoseconds())/1e3)
				ev = append(ev, 1e3*float64(ms))
				enq = append(enq, float64(t2.Sub(t1).Nanoseconds())/1e3)
			}
		}
		if locked {
			runtime.UnlockOSThread()
		}
		med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
		t.Logf("empty kernel, thread locked %v: wall %.2f us, event %.2f us, launch call %.2f us (medians)", locked, med(wall), med(ev), med(enq))
	}
}
