package flashattn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/stats"
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
	// Backward: the timing is of the backward pass (BenchBackward), or
	// with WithForward of a forward and then its backward in one timed call
	// (BenchForwardBackward: a training step's attention, as PyTorch's
	// forward+backward timing runs it).
	Backward, WithForward bool
	// Kernel is the kernel timed (BenchBackward, BenchForwardBackward: the
	// dK/dV kernel, or the single pass); Kernels all kernels of one timed
	// call in launch order (forward: Kernel alone; backward: pre, dK/dV, dQ,
	// or pre, the single pass, dQ convert; forward+backward: the forward's,
	// then the backward's).
	Kernel  KernelInfo
	Kernels []KernelInfo
	Reps    int
	// Kernel time per call by CUDA events: median and minimum over Reps.
	MedianMs, MinMs float64
	// TFLOPS is Dims.FLOPs(Causal) (Dims.BackwardFLOPs for the backward,
	// their sum for forward+backward) over the median time; PeakTFLOPS over
	// the minimum.
	TFLOPS, PeakTFLOPS float64
	// ExtraBytes is the device memory one call allocates beyond its inputs
	// and outputs: the LSE for Forward (B*Hq*Nq float32; an output the
	// backward needs), Di = rowsum(dO*O) for Backward (the same size) and,
	// on the single-pass backward, its dQ accumulator (B*Hq*Nq*D float32,
	// Nq rounded up to the kernel's query block).
	ExtraBytes int64
	// EnqueueHidden: the events bracket the kernels alone. Each timed call
	// is enqueued behind a gate (cuda.Gate: the stream waits on a host-written
	// word) that opens after its stop event is enqueued, so the host's
	// enqueue, which on an idle GPU would sit between the start event and the
	// first kernel, is not timed (PyTorch's side, bench/sdpa.py, hides its
	// own the same way). False where the driver has no stream memory
	// operations: the events then include the first launch's latency.
	EnqueueHidden bool
	// HostOverheadUs is the median, over Reps, of the host wall time of
	// one call (record, launch(es), record, wait) minus its event time: what
	// the Go side and the driver add to the kernels.
	HostOverheadUs float64
	// LaunchUs is the median host time to enqueue one call (fill the
	// parameter block and call cuLaunchKernel, once per kernel).
	LaunchUs float64
	// LaunchFloorUs is the median host time of bare cuLaunchKernel calls
	// for the same kernels and parameter blocks: the driver's own share of
	// LaunchUs. BeyondLaunchUs = LaunchUs - LaunchFloorUs is what GoFlash
	// adds to it on the hot path.
	LaunchFloorUs, BeyondLaunchUs float64
}

// BenchForward times the forward kernel for dims on random fp16 data:
// warmup untimed launches, then reps launches each timed with CUDA events.
// Only o.Causal, o.Scale and the score modifiers (o.Window, o.Softcap,
// o.ALiBi) are used. All device memory is freed on return.
func (d *Device) BenchForward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, FP16, o, warmup, reps, passFwd)
}

// BenchForwardBF16 is BenchForward for the bf16 kernels (random bf16 data;
// the sm_80 path only).
func (d *Device) BenchForwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, BF16, o, warmup, reps, passFwd)
}

// BenchBackward times the backward pass (its three kernels, launched
// together as Backward does, on the path o.Deterministic picks) for dims on
// random fp16 q, k, v and dOut, with O and the LSE from one Forward: warmup
// untimed calls, then reps calls each timed with CUDA events. TFLOPS counts
// Dims.BackwardFLOPs (the FA2 paper's convention; the three-kernel path
// recomputes S and dP in both the dK/dV and the dQ kernel, so it executes
// 7/5 of that). Only o.Causal, o.Scale, o.Deterministic and the score
// modifiers (o.Window, o.Softcap, o.ALiBi: the modified three kernels) are
// used. All device memory is freed on return.
func (d *Device) BenchBackward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, FP16, o, warmup, reps, passBwd)
}

// BenchForwardBackward times a forward and then its backward (the backward
// reading the O and LSE that forward wrote) enqueued back to back, each
// call timed as one by CUDA events: what a training step's attention costs,
// measured as PyTorch's forward+backward is (one timed region), not as the
// sum of two separately timed passes. Options as BenchBackward.
func (d *Device) BenchForwardBackward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, FP16, o, warmup, reps, passFwdBwd)
}

// BenchBackwardBF16 is BenchBackward for the bf16 kernels (random bf16 data;
// the sm_80 path only).
func (d *Device) BenchBackwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, BF16, o, warmup, reps, passBwd)
}

// BenchForwardBackwardBF16 is BenchForwardBackward for the bf16 kernels
// (random bf16 data; the sm_80 path only).
func (d *Device) BenchForwardBackwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.bench(dims, BF16, o, warmup, reps, passFwdBwd)
}

// benchPass is what one timed benchmark call runs.
type benchPass int

const (
	passFwd    benchPass = iota // Forward
	passBwd                     // Backward (O and the LSE from one untimed Forward)
	passFwdBwd                  // Forward, then Backward on its O and LSE
)

// bench times the op that Forward (or Backward, or both) runs, prepared
// once and enqueued warmup + reps times, on inputs of dtype dt.
func (d *Device) bench(dims Dims, dt DType, o *Options, warmup, reps int, pass benchPass) (BenchResult, error) {
	if reps < 1 || warmup < 0 {
		return BenchResult{}, &OptionError{Option: "reps/warmup", Value: fmt.Sprint(reps, warmup), Reason: "want reps >= 1, warmup >= 0"}
	}
	if err := dims.Validate(); err != nil {
		return BenchResult{}, err
	}
	p, err := o.resolve(dims)
	if err != nil {
		return BenchResult{}, err
	}
	return d.benchProblem(p, dt, warmup, reps, pass)
}

// benchProblem is bench for a resolved problem (a varlen one too).
func (d *Device) benchProblem(p problem, dt DType, warmup, reps int, pass benchPass) (BenchResult, error) {
	dims, backward := p.Dims, pass != passFwd
	if err := d.lock(); err != nil {
		return BenchResult{}, err
	}
	defer d.mu.Unlock()
	// The kernels first: a problem they cannot run costs no device memory.
	if _, _, err := d.plan(planRequest{op: opForward, p: p, dt: dt}); err != nil {
		return BenchResult{}, err
	}
	if backward {
		if _, _, err := d.plan(planRequest{op: opBackward, p: p, dt: dt}); err != nil {
			return BenchResult{}, err
		}
	}
	in, err := d.benchInputs(p.Dims, dt, backward)
	defer func() { _ = freeAll(in) }()
	if err != nil {
		return BenchResult{}, err
	}
	var op deviceOp
	var bwd *bwdOp
	switch pass {
	case passFwd:
		if op, err = d.newForward(p, in[0], in[1], in[2]); err != nil {
			return BenchResult{}, err
		}
	case passBwd:
		fwd, err := d.forward(p, in[0], in[1], in[2])
		if err != nil {
			return BenchResult{}, err
		}
		defer func() { _ = fwd.Free() }()
		if bwd, err = d.newBackward(p, in[0], in[1], in[2], fwd, in[3]); err != nil {
			return BenchResult{}, err
		}
		op = bwd
	case passFwdBwd:
		fop, err := d.newForward(p, in[0], in[1], in[2])
		if err != nil {
			return BenchResult{}, err
		}
		// One forward before the backward is prepared: newBackward reads
		// nothing, but a fault should be the forward's.
		if err := d.run(fop); err != nil {
			return BenchResult{}, errors.Join(err, fop.free())
		}
		if bwd, err = d.newBackward(p, in[0], in[1], in[2], fop.res, in[3]); err != nil {
			return BenchResult{}, errors.Join(err, fop.free())
		}
		op = stepOp{fop, bwd}
	}
	defer func() { _ = op.free() }()
	ks := op.kernels()
	r := BenchResult{Dims: dims, Causal: p.Causal, Backward: backward, WithForward: pass == passFwdBwd, Kernel: ks[0], Kernels: ks,
		ExtraBytes: 4 * int64(dims.LSELen()+len(p.ALiBi))} // the LSE, ALiBi's slopes
	switch {
	case bwd != nil:
		r.Kernel = bwd.kernels()[1] // dK/dV (or the single pass), the one that does most of the work
		r.ExtraBytes = bwd.extraBytes()
		if pass == passFwdBwd { // and the forward's LSE
			r.ExtraBytes += 4 * int64(dims.LSELen())
		}
	case p.varlen != nil: // and the cumulative lengths
		r.ExtraBytes += varlenCuBytes(p)
	}
	if err := d.timeCalls(&r, op, warmup, reps); err != nil {
		return BenchResult{}, err
	}
	return r, nil
}

// stepOp is a forward and then the backward that reads its O and LSE, as
// one op (BenchForwardBackward).
type stepOp struct {
	fwd *fwdOp
	bwd *bwdOp
}

func (s stepOp) enqueue() error {
	if err := s.fwd.enqueue(); err != nil {
		return err
	}
	return s.bwd.enqueue()
}

func (s stepOp) relaunch() error {
	if err := s.fwd.relaunch(); err != nil {
		return err
	}
	return s.bwd.relaunch()
}

func (s stepOp) kernels() []KernelInfo { return append(s.fwd.kernels(), s.bwd.kernels()...) }
func (s stepOp) free() error           { return errors.Join(s.bwd.free(), s.fwd.free()) }

// benchInputs are random q, k, v of dtype dt (and dOut for the backward) on the
// device, drawn from N(0, 1) as a pool of 2^20 values repeated: kernel time
// does not depend on the values, and drawing 10^8 normals would not be free.
// On failure the tensors made so far are returned with the error; d.mu is
// held.
func (d *Device) benchInputs(dims Dims, dt DType, backward bool) ([]*DeviceTensor, error) {
	rng := rand.New(rand.NewPCG(uint64(dims.D), uint64(dims.Nq)))
	pool := make([]uint16, 1<<20)
	conv := Float32ToFP16
	if dt == BF16 {
		conv = Float32ToBF16
	}
	for i := range pool {
		pool[i] = conv(float32(rng.NormFloat64()))
	}
	ins := []struct {
		s      Shape
		offset int // into the pool, so that q, k, v and dOut differ
	}{{dims.QShape(), 0}, {dims.KVShape(), 1 << 18}, {dims.KVShape(), 1 << 19}, {dims.QShape(), 3 << 18}}
	if !backward {
		ins = ins[:3]
	}
	var out []*DeviceTensor
	for _, in := range ins {
		t, err := d.allocAs(in.s, dt)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		bits := make([]uint16, in.s.Numel())
		for i := range bits {
			bits[i] = pool[(i+in.offset)&(len(pool)-1)]
		}
		if err := cuda.CopyToDevice(t.buf, bits); err != nil {
			return out, err
		}
	}
	return out, nil
}

// launchFloorReps bounds the bare relaunches launchFloor times: each also
// runs the kernels, and a handful gives a stable median of a few µs.
const launchFloorReps = 20

// launchFloor is the median host time of op.relaunch over n calls: the
// driver's cuLaunchKernel for op's kernels and parameters, nothing of ours.
// Each relaunch starts, like each timed enqueue, on an idle stream (a launch
// behind queued work costs the driver more), with the context bound as
// LaunchBound requires; d.mu is held and the OS thread locked.
func (d *Device) launchFloor(op deviceOp, n int) (float64, error) {
	us := make([]float64, n)
	for i := range us {
		if err := d.stream.Synchronize(); err != nil {
			return 0, err
		}
		if err := d.ctx.Bind(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		err := op.relaunch()
		us[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
		d.ctx.Unbind()
		if err != nil {
			return 0, err
		}
	}
	return stats.Median(us), d.stream.Synchronize()
}

// timeCalls enqueues op warmup times untimed, then reps times each timed
// with CUDA events, and fills r's times; d.mu is held.
func (d *Device) timeCalls(r *BenchResult, op deviceOp, warmup, reps int) error {
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
		if err := op.enqueue(); err != nil {
			return err
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("flashattn: %s: %w", opName(op), err)
	}
	// One OS thread for the whole loop: the driver keeps per-thread state,
	// and a goroutine that moved threads between calls would time that too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gate, gerr := d.ctx.NewGate()
	if gerr == nil {
		defer func() { _ = gate.Destroy() }() // after the last wait below
	}
	r.EnqueueHidden = gerr == nil
	ms := make([]float64, reps)
	overhead := make([]float64, reps)
	enqueue := make([]float64, reps)
	for i := range reps {
		t0 := time.Now()
		if r.EnqueueHidden && gate.Hold(d.stream) != nil {
			r.EnqueueHidden = false // no stream memory operations here: time without the gate
		}
		err := start.Record(d.stream)
		t1 := time.Now()
		err = errors.Join(err, op.enqueue())
		t2 := time.Now()
		err = errors.Join(err, stop.Record(d.stream))
		if r.EnqueueHidden {
			gate.Open() // always, or the stream would wait forever
		}
		err = errors.Join(err, stop.Synchronize())
		wall := time.Since(t0)
		if err != nil {
			return fmt.Errorf("flashattn: %s: %w", opName(op), err)
		}
		e, err := cuda.Elapsed(start, stop)
		if err != nil {
			return err
		}
		ms[i] = float64(e)
		overhead[i] = float64(wall.Nanoseconds())/1e3 - 1e3*float64(e)
		enqueue[i] = float64(t2.Sub(t1).Nanoseconds()) / 1e3
	}
	floor, err := d.launchFloor(op, min(reps, launchFloorReps))
	if err != nil {
		return fmt.Errorf("flashattn: %s: %w", opName(op), err)
	}
	r.Reps = reps
	r.MedianMs, r.MinMs = stats.Median(ms), slices.Min(ms)
	r.HostOverheadUs, r.LaunchUs = stats.Median(overhead), stats.Median(enqueue)
	r.LaunchFloorUs = floor
	r.BeyondLaunchUs = r.LaunchUs - floor
	flops := r.Dims.FLOPs(r.Causal)
	switch {
	case r.WithForward:
		flops += r.Dims.BackwardFLOPs(r.Causal)
	case r.Backward:
		flops = r.Dims.BackwardFLOPs(r.Causal)
	}
	r.TFLOPS = flops / (r.MedianMs * 1e-3) / 1e12
	r.PeakTFLOPS = flops / (r.MinMs * 1e-3) / 1e12
	return nil
}
