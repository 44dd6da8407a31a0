package flashattn

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

// withLimit sets HostMemoryLimit for one test.
func withLimit(t *testing.T, n int64) {
	old := SetHostMemoryLimit(n)
	t.Cleanup(func() { SetHostMemoryLimit(old) })
}

func wantMemoryError(t *testing.T, what string, err error) {
	t.Helper()
	var me *MemoryError
	if !errors.As(err, &me) || me.Need <= me.Limit || me.Limit != HostMemoryLimit() || !strings.Contains(err.Error(), "HostMemoryLimit") {
		t.Errorf("%s: %v, want a *MemoryError saying what it needs and what is allowed", what, err)
	}
}

// TestMemoryLimitRefuses: inputs whose allocations would make the Go runtime
// end the process are refused before anything is allocated.
func TestMemoryLimitRefuses(t *testing.T) {
	withLimit(t, 1<<30)
	// A zero-stride view of one float describing 2^31 rows: its dense
	// output and LSE are 16 GiB.
	view := &Tensor{Shape: Shape{B: 1, N: 1 << 31, H: 1, D: 1}, Data: []float32{1}}
	one := Random(Shape{B: 1, N: 1, H: 1, D: 1}, 1)
	_, err := Forward(view, one, one, &Options{Backend: CPUFlash})
	wantMemoryError(t, "2^31-row view", err)
	// CPUNaive's S and P: 2 * 4 * 16384^2 bytes = 2 GiB at D = 1.
	n := Random(Shape{B: 1, N: 16384, H: 1, D: 1}, 2)
	_, err = Forward(n, n, n, &Options{Backend: CPUNaive})
	wantMemoryError(t, "CPUNaive N=16384", err)
	// The flash path needs no N^2 buffer: the same problem fits.
	p, err := (&Options{}).resolve(Dims{B: 1, Nq: 16384, Nk: 16384, Hq: 1, Hkv: 1, D: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, backward := range []bool{false, true} {
		if err := reserveCall(CPUFlash, flashImpl{}, p, nil, backward); err != nil {
			t.Errorf("CPUFlash N=16384: %v", err)
		}
	}
	// A trace of 1 x 1 blocks at N = 16384: 2^28 steps.
	_, err = Forward(n, n, n, &Options{Backend: CPUFlash, BlockQ: 1, BlockK: 1, Trace: &Trace{}})
	wantMemoryError(t, "trace of 2^28 steps", err)
	// Tiles as large as the problem, in every goroutine: 1024 x 16384 x 16384.
	_, err = Forward(n, n, n, &Options{Backend: CPUFlash, BlockQ: 1 << 40, BlockK: 1 << 40, Workers: MaxWorkers})
	wantMemoryError(t, "1024 whole-problem tiles", err)
	var oe *OptionError
	if _, err := Forward(one, one, one, &Options{Workers: math.MaxInt, BlockQ: 1}); !errors.As(err, &oe) || oe.Option != "Workers" {
		t.Errorf("Workers = MaxInt: %v, want *OptionError", err)
	}
	// The backward pass is bounded too.
	_, err = Backward(n, n, n, n, n, make([]float32, 16384), &Options{Backend: CPUNaive})
	wantMemoryError(t, "CPUNaive backward N=16384", err)

	// New and Random never panic: a shape too large gives nil Data, which
	// every function refuses, saying why; Make says it at once.
	for _, s := range []Shape{{1 << 32, 1 << 32, 1, 1}, {1, 1<<28 + 1, 1, 1}, {3, 1 << 32, 1, 1}} {
		for _, tt := range []*Tensor{New(s), Random(s, 1)} {
			if tt.Data != nil {
				t.Fatalf("New(%v) allocated %d elements", s, len(tt.Data))
			}
			if _, err := Forward(tt, one, one, nil); err == nil {
				t.Errorf("Forward(New(%v)) succeeded", s)
			}
		}
		if _, err := Make(s); err == nil {
			t.Errorf("Make(%v) succeeded", s)
		}
	}
	_, err = Make(Shape{1, 1 << 28, 1, 1}) // 1 GiB: exactly the limit
	if err != nil {
		t.Errorf("Make of exactly HostMemoryLimit bytes: %v", err)
	}
	_, err = Make(Shape{1, 1<<28 + 1, 1, 1})
	wantMemoryError(t, "Make beyond the limit", err)
	_, err = Forward(New(Shape{1, 1<<28 + 1, 1, 1}), one, one, nil)
	wantMemoryError(t, "Forward(New(beyond the limit))", err)
}

// TestRefusedTensorMethods: the tensor New gives for a shape beyond the
// limit (nil Data), a short one and a nil one go through Contiguous, Clone
// and Fill without a panic, and what comes out is refused with a typed error.
func TestRefusedTensorMethods(t *testing.T) {
	withLimit(t, 1<<20)
	big := New(Shape{B: 1, N: 1 << 20, H: 1, D: 1})
	short := &Tensor{Shape: Shape{B: 1, N: 4, H: 1, D: 2}, Strides: Shape{B: 1, N: 4, H: 1, D: 2}.ContiguousStrides(), Data: make([]float32, 7)}
	one := Random(Shape{B: 1, N: 1, H: 1, D: 2}, 1)
	for _, x := range []struct {
		what string
		t    *Tensor
	}{{"New beyond the limit", big}, {"short Data", short}, {"nil", nil}} {
		x.t.Fill(1)
		for _, c := range []*Tensor{x.t.Contiguous(), x.t.Clone()} {
			if c != nil && c.Data != nil {
				t.Errorf("%s: Contiguous/Clone gave data %d", x.what, len(c.Data))
			}
			if _, err := Forward(c, one, one, nil); err == nil {
				t.Errorf("%s: Forward of its copy ran", x.what)
			}
		}
	}
	if short.Data[6] != 0 {
		t.Errorf("Fill wrote a tensor it refuses")
	}
	// A copy beyond the limit: a strided view of small data, dense too large.
	view := &Tensor{Shape: Shape{B: 1, N: 1 << 20, H: 1, D: 1}, Data: []float32{3}}
	if c := view.Contiguous(); c.Data != nil {
		t.Errorf("dense copy of a 2^20-row view under a 1 MiB limit: %d floats", len(c.Data))
	}
	var me *MemoryError
	if _, err := Forward(big, big, big, nil); !errors.As(err, &me) {
		t.Errorf("Forward of New beyond the limit: %v, want a *MemoryError", err)
	}
}

// TestNilDevice: a nil *Device acts as a closed one.
func TestNilDevice(t *testing.T) {
	var d *Device
	if err := d.Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
	one := Random(Shape{B: 1, N: 2, H: 1, D: 8}, 1)
	if _, err := d.Upload(one); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("nil Upload: %v", err)
	}
	if _, err := d.ForwardHost(one, one, one, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("nil ForwardHost: %v", err)
	}
	if _, err := d.Forward(nil, nil, nil, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("nil Forward: %v", err)
	}
	if _, err := d.Kernels(OpForward, Dims{1, 1, 1, 1, 1, 64}, FP16, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("nil Kernel: %v", err)
	}
	if d.Info().Name != "" || d.SupportedHeadDims(OpForward, FP16, nil) != nil || d.SupportedHeadDims(OpBackward, FP16, nil) != nil || d.ForcePath(75) == nil || d.Rung() != len(Ladder()) {
		t.Error("nil Info/HeadDims/ForcePath/Rung")
	}
	var rb *RungBuild // what a failed CompileRung returns
	if _, ok := rb.Kernel(64, false); ok {
		t.Error("nil RungBuild's Kernel found one")
	}
}

// TestHostBytesAccounting: what reserveCall counts is what a call
// allocates (the Go runtime's TotalAlloc), within 10% and 64 KiB, for every
// backend path the CPU runs; otherwise the limit would guard nothing.
func TestHostBytesAccounting(t *testing.T) {
	d := Dims{B: 2, Nq: 300, Nk: 260, Hq: 4, Hkv: 2, D: 32}
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	for _, c := range []struct {
		be Backend
		im impl
		o  Options
	}{
		{CPUNaive, naiveImpl{}, Options{Workers: 3}},
		{CPUFlash, flashImpl{}, Options{Workers: 3, BlockQ: 48, BlockK: 40}},
		{CPUFlash, flashImpl{}, Options{Workers: 1, Trace: &Trace{Row: 5}}},
	} {
		o := c.o
		o.Backend = c.be
		p, err := o.resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Forward(q, k, v, &o)
		if err != nil {
			t.Fatal(err)
		}
		for _, backward := range []bool{false, true} {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if backward {
				_, err = Backward(q, k, v, res.Out, dO, res.LSE, &o)
			} else {
				_, err = Forward(q, k, v, &o)
			}
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			got := float64(after.TotalAlloc - before.TotalAlloc)
			out := floats(d.QShape().Numel(), d.LSELen())
			if backward {
				out = floats(d.QShape().Numel(), 2*d.KVShape().Numel())
			}
			want := out + c.im.hostBytes(p, &o, backward)
			t.Logf("%v %+v backward %t: allocated %.0f, counted %.0f", c.be, c.o, backward, got, want)
			if got > 1.1*want+64<<10 || got < 0.9*want-64<<10 {
				t.Errorf("%v %+v backward %t: allocated %.0f bytes, counted %.0f", c.be, c.o, backward, got, want)
			}
		}
	}
}

// TestHostMemoryLimitDefault: the machine's memory, and back after a Set.
func TestHostMemoryLimitDefault(t *testing.T) {
	m := HostMemoryLimit()
	if m < 1<<28 || m > unknownMemory {
		t.Fatalf("HostMemoryLimit() = %d", m)
	}
	if old := SetHostMemoryLimit(12345); old != m || HostMemoryLimit() != 12345 {
		t.Fatalf("SetHostMemoryLimit: old %d, now %d", old, HostMemoryLimit())
	}
	SetHostMemoryLimit(0)
	if HostMemoryLimit() != m {
		t.Fatalf("SetHostMemoryLimit(0) gave %d, want the machine's %d", HostMemoryLimit(), m)
	}
	t.Logf("HostMemoryLimit: %s", fmtBytes(m))
}
