package flashattn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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

// BenchResult is the timing of one problem by Device.Bench.
type BenchResult struct {
	Dims   Dims
	Causal bool
	// Backward: the timing is of the backward pass (OpBackward,
	// OpVarlenBackward), or with WithForward of a forward and then its
	// backward in one timed call (OpForwardBackward: a training step's
	// attention, as PyTorch's forward+backward timing runs it).
	Backward, WithForward bool
	// Kernel is the kernel timed (the backward's: the dK/dV kernel, or the
	// single pass; decode: the split kernel); Kernels all kernels of one
	// timed call in launch order (forward: Kernel alone; backward: pre,
	// dK/dV, dQ, or pre, the single pass, dQ convert; forward+backward: the
	// forward's, then the backward's; decode: the split kernel, then the
	// merge where there is one).
	Kernel  KernelInfo
	Kernels []KernelInfo
	Reps    int
	// Kernel time per call by CUDA events: median and minimum over Reps.
	MedianMs, MinMs float64
	// TFLOPS is Dims.FLOPs(Causal) (Dims.BackwardFLOPs for the backward,
	// the FA2 paper's convention: the three-kernel path recomputes S and dP
	// in both the dK/dV and the dQ kernel, so it executes 7/5 of that;
	// their sum for forward+backward) over the median time; PeakTFLOPS
	// over the minimum. The varlen ops count the real tokens only (the sum
	// over sequences of each alone); OpKVCache counts Dims.FLOPs(false)
	// (the causal mask of a decode step hides at most Nq-1 keys per row)
	// over the entries a sliding window leaves.
	TFLOPS, PeakTFLOPS float64
	// ExtraBytes is the device memory one call allocates beyond its inputs
	// and outputs: the LSE for the forward (B*Hq*Nq float32; an output the
	// backward needs), Di = rowsum(dO*O) for the backward (the same size)
	// and, on the single-pass backward, its dQ accumulator (B*Hq*Nq*D
	// float32, Nq rounded up to the kernel's query block); the varlen ops'
	// cumulative lengths; decode's LSE and split workspace.
	ExtraBytes int64
	// EnqueueHidden: the events bracket the kernels alone. Each timed call
	// is enqueued behind a gate (cuda.Gate: the stream waits on a host-written
	// word) that opens after its stop event is enqueued, so the host's
	// enqueue, which on an idle GPU would sit between the start event and the
	// first kernel, is not timed (PyTorch's side, bench/sdpa.py, hides its
	// own the same way). False where the driver has no stream memory
	// operations, or under a CUDA tool (Nsight Compute would wait forever
	// on the held stream): the events then include the first launch's
	// latency.
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
	// OpKVCache: Splits is the number of KV splits the call used (1: no
	// merge), PageSize the paged cache's block size (0: contiguous),
	// KVBytes what the decode kernel must read of the cache (the K and V
	// rows of every sequence, B * Nk * Hkv * D * 2 tensors * the element
	// size; with a sliding window of Left, its min(Nk, Left+Nq) last rows
	// instead of Nk), and TBps KVBytes over the median time, in TB/s (1e12
	// bytes per second).
	Splits   int     `json:",omitempty"`
	PageSize int     `json:",omitempty"`
	KVBytes  int64   `json:",omitempty"`
	TBps     float64 `json:",omitempty"`
}

// BenchConfig is how Device.Bench times a call: Warmup untimed calls
// (at least 0), then Reps calls (at least 1) each timed with CUDA events;
// and what the varlen and decode ops take beyond their dims.
type BenchConfig struct {
	Warmup, Reps int
	// Varlen (OpVarlenForward, OpVarlenBackward) packs the sequences of
	// dims (B 1, Nq and Nk their totals), as ForwardVarlen's; zero: one
	// sequence.
	Varlen Varlen
	// PageSize (OpKVCache) pages the cache in blocks of PageSize entries (a
	// multiple of PageMultiple that divides Nk), handed out to the
	// sequences in a shuffled order; 0: a contiguous cache.
	PageSize int
}

// Bench times calls op of problem dims on random data of element type dt,
// drawn from N(0, 1): cfg.Warmup untimed calls, then cfg.Reps calls each
// timed with CUDA events. The call is prepared once (its kernels,
// parameter block and buffers) and enqueued each time as the Device call
// runs it: OpForward times the forward kernel; OpBackward the backward's
// kernels, launched together on the path o.Deterministic picks, with O and
// the LSE from one untimed forward (the forward Forward runs: on a ladder
// rung the rung's, so only its head dims are timed there); OpForwardBackward the forward and then
// its backward enqueued back to back, timed as one call (as PyTorch's
// forward+backward is, not as the sum of two separately timed passes);
// OpVarlenForward and OpVarlenBackward the packed calls (cfg.Varlen);
// OpKVCache one decode call (ForwardKVCache's kernels) of q (B, Nq, Hq, D)
// against a cache of dims.Nk entries per sequence (every SeqLens is Nk),
// paged by cfg.PageSize. Raw plans are timed by their caller: the raw ops
// are an *OptionError. Of o only Causal, Scale, Deterministic and the score
// modifiers (Window, Softcap, ALiBi) are used. A problem the device cannot
// run fails before any device memory is allocated, and all device memory
// is freed on return.
func (d *Device) Bench(op Op, dims Dims, dt DType, o *Options, cfg BenchConfig) (BenchResult, error) {
	if err := checkBench(op, dt, cfg); err != nil {
		return BenchResult{}, err
	}
	p, err := opProblem(op, dims, cfg.Varlen, cfg.PageSize, o)
	if err != nil {
		return BenchResult{}, err
	}
	r, err := d.benchProblem(p, dt, cfg, op)
	if err != nil || p.varlen == nil {
		return r, err
	}
	r.setRate(varlenFLOPs(p, op.backward()))
	return r, nil
}

// varlenFLOPs counts the real tokens of packed problem p only: the sum over
// its sequences of Dims.FLOPs (backward: BackwardFLOPs) of each alone.
func varlenFLOPs(p problem, backward bool) float64 {
	var flops float64
	cuQ, cuK := p.varlen.CuSeqlensQ, p.varlen.CuSeqlensK
	for s := 1; s < len(cuQ); s++ {
		seq := Dims{B: 1, Nq: cuQ[s] - cuQ[s-1], Nk: cuK[s] - cuK[s-1], Hq: p.Hq, Hkv: p.Hkv, D: p.D}
		if backward {
			flops += seq.BackwardFLOPs(p.Causal)
		} else {
			flops += seq.FLOPs(p.Causal)
		}
	}
	return flops
}

// setRate sets TFLOPS and PeakTFLOPS to flops over the median and the
// minimum time.
func (r *BenchResult) setRate(flops float64) {
	r.TFLOPS = flops / (r.MedianMs * 1e-3) / 1e12
	r.PeakTFLOPS = flops / (r.MinMs * 1e-3) / 1e12
}

// checkBench refuses what Bench cannot time: an op without a Device call,
// a dtype that is none, too few reps, and a Varlen or PageSize given to an
// op that takes none.
func checkBench(op Op, dt DType, cfg BenchConfig) error {
	if err := checkOp(op); err != nil {
		return err
	}
	switch {
	case op == OpRawForward || op == OpRawBackward:
		return &OptionError{Option: "op", Value: op.String(), Reason: "Bench times the Device calls; a raw plan's Enqueue is timed on the caller's stream"}
	case dt.Size() == 0:
		return checkDType(dt, 0)
	case cfg.Reps < 1 || cfg.Warmup < 0:
		return &OptionError{Option: "Reps/Warmup", Value: fmt.Sprint(cfg.Reps, cfg.Warmup), Reason: "want Reps >= 1, Warmup >= 0"}
	case (cfg.Varlen.CuSeqlensQ != nil || cfg.Varlen.CuSeqlensK != nil) && op != OpVarlenForward && op != OpVarlenBackward:
		return &OptionError{Option: "Varlen", Value: fmt.Sprint(cfg.Varlen.Seqs(), " sequences"), Reason: "only the varlen ops take packed sequences"}
	case cfg.PageSize != 0 && op != OpKVCache:
		return &OptionError{Option: "PageSize", Value: fmt.Sprint(cfg.PageSize), Reason: "only OpKVCache has a cache to page"}
	}
	return nil
}

// benchProblem times op on a resolved problem (opProblem's), prepared once
// and enqueued cfg.Warmup + cfg.Reps times, on inputs of dtype dt.
func (d *Device) benchProblem(p problem, dt DType, cfg BenchConfig, op Op) (BenchResult, error) {
	dims, backward := p.Dims, op.backward()
	if err := d.lock(); err != nil {
		return BenchResult{}, err
	}
	defer d.mu.Unlock()
	// The kernels first: a problem they cannot run costs no device memory.
	// A backward's O and LSE come from one forward.
	need := op
	if backward {
		need = OpForwardBackward
	}
	if _, err := d.opKernels(need, p, dt); err != nil {
		return BenchResult{}, err
	}
	in, err := d.benchInputs(p.Dims, dt, backward)
	defer func() { _ = freeAll(in) }()
	if err != nil {
		return BenchResult{}, err
	}
	var dop deviceOp
	var bwd *bwdOp
	switch op {
	case OpKVCache:
		return d.benchDecode(p, dt, cfg, in)
	case OpForward, OpVarlenForward:
		if dop, err = d.newForward(p, in[0], in[1], in[2]); err != nil {
			return BenchResult{}, err
		}
	case OpBackward, OpVarlenBackward:
		fwd, err := d.forward(p, in[0], in[1], in[2])
		if err != nil {
			return BenchResult{}, err
		}
		defer func() { _ = fwd.Free() }()
		if bwd, err = d.newBackward(p, in[0], in[1], in[2], fwd, in[3]); err != nil {
			return BenchResult{}, err
		}
		dop = bwd
	case OpForwardBackward:
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
		dop = stepOp{fop, bwd}
	}
	defer func() { _ = dop.free() }()
	ks := dop.kernels()
	r := BenchResult{Dims: dims, Causal: p.Causal, Backward: backward, WithForward: op == OpForwardBackward, Kernel: ks[0], Kernels: ks,
		ExtraBytes: 4 * int64(dims.LSELen()+len(p.ALiBi))} // the LSE, ALiBi's slopes
	switch {
	case bwd != nil:
		r.Kernel = bwd.kernels()[1] // dK/dV (or the single pass), the one that does most of the work
		r.ExtraBytes = bwd.extraBytes()
		if op == OpForwardBackward { // and the forward's LSE
			r.ExtraBytes += 4 * int64(dims.LSELen())
		}
	case p.varlen != nil: // and the cumulative lengths
		r.ExtraBytes += varlenCuBytes(p)
	}
	if err := d.timeCalls(&r, dop, cfg.Warmup, cfg.Reps); err != nil {
		return BenchResult{}, err
	}
	return r, nil
}

// stepOp is a forward and then the backward that reads its O and LSE, as
// one op (OpForwardBackward).
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

// profiled reports a CUDA tool in the process: Nsight Systems and
// compute-sanitizer name their library in CUDA_INJECTION64_PATH, Nsight
// Compute's launcher preloads its own and sets the other toolEnv variables.
// The calls are then timed without the gate: Nsight Compute runs each kernel
// to completion inside its launch, behind the stream's earlier work, and a
// stream held for the host opens only after the launches return, so it would
// never run.
func profiled() bool {
	for _, v := range toolEnv {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// toolEnv are the variables by which profiled knows a CUDA tool.
var toolEnv = []string{"CUDA_INJECTION64_PATH", "NV_COMPUTE_PROFILER_PERFWORKS_DIR", "NV_NSIGHT_INJECTION_TRANSPORT_TYPE"}

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
	var gate *cuda.Gate
	if !profiled() {
		if g, err := d.ctx.NewGate(); err == nil {
			gate = g
			defer func() { _ = gate.Destroy() }() // after the last wait below
		}
	}
	r.EnqueueHidden = gate != nil
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
	r.setRate(flops)
	return nil
}
