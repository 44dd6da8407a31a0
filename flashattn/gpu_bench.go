package flashattn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/goflash/goflash/internal/cuda"
)

// BenchShape is one benchmark problem.
type BenchShape struct {
	Dims   Dims
	Causal bool
}

// PaperShapes are the FA2 paper's forward benchmark problems: 16k tokens
// per batch (B = 16384/N), hidden size 2048 (H = 2048/D), D 64 and 128,
// N 512 to 16384, causal and not.
func PaperShapes() []BenchShape {
	var out []BenchShape
	for _, d := range []int{64, 128} {
		for _, causal := range []bool{false, true} {
			for n := 512; n <= 16384; n *= 2 {
				h := 2048 / d
				out = append(out, BenchShape{Dims{B: 16384 / n, Nq: n, Nk: n, Hq: h, Hkv: h, D: d}, causal})
			}
		}
	}
	return out
}

// BenchResult is the timing of one problem by BenchForward or BenchBackward.
type BenchResult struct {
	Dims   Dims
	Causal bool
	// Backward: the timing is of the backward pass (BenchBackward).
	Backward bool
	// Kernel is the kernel timed (BenchBackward: the dK/dV kernel); Kernels
	// all kernels of one timed call in launch order (forward: Kernel alone;
	// backward: pre, dK/dV, dQ).
	Kernel  KernelInfo
	Kernels []KernelInfo
	Reps    int
	// Kernel time per call by CUDA events: median and minimum over Reps.
	MedianMs, MinMs float64
	// TFLOPS is Dims.FLOPs(Causal) (2.5 times that for the backward, the FA2
	// paper's convention) over the median time; PeakTFLOPS over the minimum.
	TFLOPS, PeakTFLOPS float64
	// ExtraBytes is the device memory one call allocates beyond its inputs
	// and outputs: the LSE for Forward (B*Hq*Nq float32; an output the
	// backward needs), Di = rowsum(dO*O) for Backward (the same size).
	ExtraBytes int64
	// HostOverheadUs is the median, over Reps, of the host wall time of
	// one call (record, launch(es), record, wait) minus its event time: what
	// the Go side and the driver add to the kernels.
	HostOverheadUs float64
	// LaunchUs is the median host time to enqueue one call (fill the
	// parameter block and call cuLaunchKernel, once per kernel).
	LaunchUs float64
}

// benchSetup checks the arguments shared by BenchForward and BenchBackward.
func benchSetup(dims Dims, o *Options, warmup, reps int) (scale float64, err error) {
	if reps < 1 || warmup < 0 {
		return 0, &OptionError{Option: "reps/warmup", Value: fmt.Sprint(reps, warmup), Reason: "want reps >= 1, warmup >= 0"}
	}
	if err := dims.Validate(); err != nil {
		return 0, err
	}
	if err := o.check(dims); err != nil {
		return 0, err
	}
	scale, _ = o.scale(dims.D)
	return scale, nil
}

// benchMem allocates random fp16 tensors and buffers for a benchmark and
// frees them all at once; d.mu is held.
type benchMem struct {
	d     *Device
	pool  []uint16
	owned []*cuda.Buffer
}

func newBenchMem(d *Device, dims Dims) *benchMem {
	// N(0, 1) inputs from a pool of 2^20 values repeated: kernel time does
	// not depend on the values, and drawing 10^8 normals would not be free.
	rng := rand.New(rand.NewPCG(uint64(dims.D), uint64(dims.Nq)))
	pool := make([]uint16, 1<<20)
	for i := range pool {
		pool[i] = Float32ToFP16(float32(rng.NormFloat64()))
	}
	return &benchMem{d: d, pool: pool}
}

func (m *benchMem) free() {
	for _, b := range m.owned {
		_ = b.Free()
	}
}

// random is a tensor of pool values starting at offset; uninitialised with offset < 0.
func (m *benchMem) random(s Shape, offset int) (*DeviceTensor, error) {
	t, err := m.d.alloc(s)
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, t.buf)
	if offset < 0 {
		return t, nil
	}
	bits := make([]uint16, s.Numel())
	for i := range bits {
		bits[i] = m.pool[(i+offset)&(len(m.pool)-1)]
	}
	return t, cuda.CopyToDevice(t.buf, bits)
}

func (m *benchMem) buffer(bytes int) (*cuda.Buffer, error) {
	b, err := m.d.ctx.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, b)
	return b, nil
}

// timeCalls runs call warmup times untimed, then reps times each timed with
// CUDA events, and fills r's times; d.mu is held. what names the kernels in
// errors.
func (d *Device) timeCalls(r *BenchResult, call func() error, warmup, reps int, what string) error {
	start, err := d.ctx.NewEvent()
	if err != nil {
		return err
	}
	defer start.Destroy()
	stop, err := d.ctx.NewEvent()
	if err != nil {
		return err
	}
	defer stop.Destroy()

	for range warmup {
		if err := call(); err != nil {
			return err
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("flashattn: kernel %s: %w", what, err)
	}
	// One OS thread for the whole loop: the driver keeps per-thread state,
	// and a goroutine that moved threads between calls would time that too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ms := make([]float64, reps)
	overhead := make([]float64, reps)
	enqueue := make([]float64, reps)
	for i := range reps {
		t0 := time.Now()
		err := start.Record(d.stream)
		t1 := time.Now()
		err = errors.Join(err, call())
		t2 := time.Now()
		err = errors.Join(err, stop.Record(d.stream), stop.Synchronize())
		wall := time.Since(t0)
		if err != nil {
			return fmt.Errorf("flashattn: kernel %s: %w", what, err)
		}
		e, err := cuda.Elapsed(start, stop)
		if err != nil {
			return err
		}
		ms[i] = float64(e)
		overhead[i] = float64(wall.Nanoseconds())/1e3 - 1e3*float64(e)
		enqueue[i] = float64(t2.Sub(t1).Nanoseconds()) / 1e3
	}
	r.Reps = reps
	r.MedianMs, r.MinMs = median(ms), slices.Min(ms)
	r.HostOverheadUs, r.LaunchUs = median(overhead), median(enqueue)
	flops := r.Dims.FLOPs(r.Causal)
	if r.Backward {
		flops *= 2.5
	}
	r.TFLOPS = flops / (r.MedianMs * 1e-3) / 1e12
	r.PeakTFLOPS = flops / (r.MinMs * 1e-3) / 1e12
	return nil
}

// BenchForward times the forward kernel for d on random fp16 data: warmup
// untimed launches, then reps launches each timed with CUDA events. Only
// o.Causal and o.Scale are used. All device memory is freed on return.
func (d *Device) BenchForward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	scale, err := benchSetup(dims, o, warmup, reps)
	if err != nil {
		return BenchResult{}, err
	}
	causal := o != nil && o.Causal
	if err := d.lock(); err != nil {
		return BenchResult{}, err
	}
	defer d.mu.Unlock()
	kern, err := d.kernel(dims, causal)
	if err != nil {
		return BenchResult{}, err
	}
	if err := d.checkGrid(dims); err != nil {
		return BenchResult{}, err
	}
	m := newBenchMem(d, dims)
	defer m.free()
	q, err := m.random(dims.QShape(), 0)
	if err != nil {
		return BenchResult{}, err
	}
	k, err := m.random(dims.KVShape(), 1<<18)
	if err != nil {
		return BenchResult{}, err
	}
	v, err := m.random(dims.KVShape(), 1<<19)
	if err != nil {
		return BenchResult{}, err
	}
	out, err := m.random(dims.QShape(), -1)
	if err != nil {
		return BenchResult{}, err
	}
	lse, err := m.buffer(4 * dims.LSELen())
	if err != nil {
		return BenchResult{}, err
	}
	r := BenchResult{Dims: dims, Causal: causal, Kernel: kern.info, Kernels: []KernelInfo{kern.info}, ExtraBytes: 4 * int64(dims.LSELen())}
	call := func() error { return d.launch(kern, dims, q, k, v, out.buf, lse, scale) }
	if err := d.timeCalls(&r, call, warmup, reps, kern.info.Symbol); err != nil {
		return BenchResult{}, err
	}
	return r, nil
}

// BenchBackward times the backward pass (the pre, dK/dV and dQ kernels,
// launched together as Backward does) for d on random fp16 q, k, v and dOut,
// with O and the LSE from one forward launch: warmup untimed calls, then reps
// calls each timed with CUDA events. TFLOPS counts 2.5 times the forward's
// FLOPs (the FA2 paper's convention; the kernels recompute S and dP in both
// the dK/dV and the dQ kernel, so they execute 7/5 of that). Only o.Causal
// and o.Scale are used. All device memory is freed on return.
func (d *Device) BenchBackward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	scale, err := benchSetup(dims, o, warmup, reps)
	if err != nil {
		return BenchResult{}, err
	}
	causal := o != nil && o.Causal
	if err := d.lock(); err != nil {
		return BenchResult{}, err
	}
	defer d.mu.Unlock()
	fwd, err := d.kernel(dims, causal)
	if err != nil {
		return BenchResult{}, err
	}
	ks, err := d.bwdKernels(dims, causal)
	if err != nil {
		return BenchResult{}, err
	}
	if err := d.checkGrid(dims); err != nil {
		return BenchResult{}, err
	}
	m := newBenchMem(d, dims)
	defer m.free()
	var ts [8]*DeviceTensor // q, k, v, dOut, out, dQ, dK, dV
	for i, x := range []struct {
		s      Shape
		offset int
	}{{dims.QShape(), 0}, {dims.KVShape(), 1 << 18}, {dims.KVShape(), 1 << 19}, {dims.QShape(), 3 << 18},
		{dims.QShape(), -1}, {dims.QShape(), -1}, {dims.KVShape(), -1}, {dims.KVShape(), -1}} {
		if ts[i], err = m.random(x.s, x.offset); err != nil {
			return BenchResult{}, err
		}
	}
	q, k, v, dOut, out := ts[0], ts[1], ts[2], ts[3], ts[4]
	g := &DeviceGrads{Dims: dims, DQ: ts[5], DK: ts[6], DV: ts[7]}
	lse, err := m.buffer(4 * dims.LSELen())
	if err != nil {
		return BenchResult{}, err
	}
	dsum, err := m.buffer(4 * dims.LSELen())
	if err != nil {
		return BenchResult{}, err
	}
	if err := d.launch(fwd, dims, q, k, v, out.buf, lse, scale); err != nil {
		return BenchResult{}, err
	}
	r := BenchResult{Dims: dims, Causal: causal, Backward: true, Kernel: ks[1].info,
		Kernels: []KernelInfo{ks[0].info, ks[1].info, ks[2].info}, ExtraBytes: 4 * int64(dims.LSELen())}
	call := func() error { return d.launchBwd(ks, dims, q, k, v, out, lse, dOut, dsum, g, scale) }
	what := ks[0].info.Symbol + ", " + ks[1].info.Symbol + ", " + ks[2].info.Symbol
	if err := d.timeCalls(&r, call, warmup, reps, what); err != nil {
		return BenchResult{}, err
	}
	return r, nil
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
