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

// BenchResult is the timing of one problem by BenchForward.
type BenchResult struct {
	Dims   Dims
	Causal bool
	Kernel KernelInfo
	Reps   int
	// Kernel time per call by CUDA events: median and minimum over Reps.
	MedianMs, MinMs float64
	// TFLOPS is Dims.FLOPs(Causal) over the median time; PeakTFLOPS over the minimum.
	TFLOPS, PeakTFLOPS float64
	// ExtraBytes is the device memory one Forward call allocates beyond
	// q, k, v and o: the LSE, B*Hq*Nq float32.
	ExtraBytes int64
	// HostOverheadUs is the median, over Reps, of the host wall time of
	// one launch (record, launch, record, wait) minus its event time: what
	// the Go side and the driver add to the kernel.
	HostOverheadUs float64
	// LaunchUs is the median host time to enqueue one launch (fill the
	// parameter block and call cuLaunchKernel).
	LaunchUs float64
}

// BenchForward times the forward kernel for d on random fp16 data: warmup
// untimed launches, then reps launches each timed with CUDA events. Only
// o.Causal and o.Scale are used. All device memory is freed on return.
func (d *Device) BenchForward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	if reps < 1 || warmup < 0 {
		return BenchResult{}, &OptionError{Option: "reps/warmup", Value: fmt.Sprint(reps, warmup), Reason: "want reps >= 1, warmup >= 0"}
	}
	if err := dims.Validate(); err != nil {
		return BenchResult{}, err
	}
	if err := o.check(dims); err != nil {
		return BenchResult{}, err
	}
	scale, _ := o.scale(dims.D)
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

	// Device buffers, freed whatever happens.
	var owned []*cuda.Buffer
	defer func() {
		for _, b := range owned {
			_ = b.Free()
		}
	}()
	// N(0, 1) inputs from a pool of 2^20 values repeated: kernel time does
	// not depend on the values, and drawing 10^8 normals would not be free.
	rng := rand.New(rand.NewPCG(uint64(dims.D), uint64(dims.Nq)))
	pool := make([]uint16, 1<<20)
	for i := range pool {
		pool[i] = Float32ToFP16(float32(rng.NormFloat64()))
	}
	tensor := func(s Shape, offset int) (*DeviceTensor, error) {
		t, err := d.alloc(s)
		if err != nil {
			return nil, err
		}
		owned = append(owned, t.buf)
		bits := make([]uint16, s.Numel())
		for i := range bits {
			bits[i] = pool[(i+offset)&(len(pool)-1)]
		}
		return t, cuda.CopyToDevice(t.buf, bits)
	}
	q, err := tensor(dims.QShape(), 0)
	if err != nil {
		return BenchResult{}, err
	}
	k, err := tensor(dims.KVShape(), 1<<18)
	if err != nil {
		return BenchResult{}, err
	}
	v, err := tensor(dims.KVShape(), 1<<19)
	if err != nil {
		return BenchResult{}, err
	}
	out, err := d.alloc(dims.QShape())
	if err != nil {
		return BenchResult{}, err
	}
	owned = append(owned, out.buf)
	lse, err := d.ctx.Alloc(4 * dims.LSELen())
	if err != nil {
		return BenchResult{}, err
	}
	owned = append(owned, lse)
	start, err := d.ctx.NewEvent()
	if err != nil {
		return BenchResult{}, err
	}
	defer start.Destroy()
	stop, err := d.ctx.NewEvent()
	if err != nil {
		return BenchResult{}, err
	}
	defer stop.Destroy()

	for range warmup {
		if err := d.launch(kern, dims, q, k, v, out.buf, lse, scale); err != nil {
			return BenchResult{}, err
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		return BenchResult{}, fmt.Errorf("flashattn: kernel %s: %w", kern.info.Symbol, err)
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
		err = errors.Join(err, d.launch(kern, dims, q, k, v, out.buf, lse, scale))
		t2 := time.Now()
		err = errors.Join(err, stop.Record(d.stream), stop.Synchronize())
		wall := time.Since(t0)
		if err != nil {
			return BenchResult{}, fmt.Errorf("flashattn: kernel %s: %w", kern.info.Symbol, err)
		}
		e, err := cuda.Elapsed(start, stop)
		if err != nil {
			return BenchResult{}, err
		}
		ms[i] = float64(e)
		overhead[i] = float64(wall.Nanoseconds())/1e3 - 1e3*float64(e)
		enqueue[i] = float64(t2.Sub(t1).Nanoseconds()) / 1e3
	}
	r := BenchResult{Dims: dims, Causal: causal, Kernel: kern.info, Reps: reps,
		MedianMs: median(ms), MinMs: slices.Min(ms), ExtraBytes: 4 * int64(dims.LSELen()),
		HostOverheadUs: median(overhead), LaunchUs: median(enqueue)}
	flops := dims.FLOPs(causal)
	r.TFLOPS = flops / (r.MedianMs * 1e-3) / 1e12
	r.PeakTFLOPS = flops / (r.MinMs * 1e-3) / 1e12
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
