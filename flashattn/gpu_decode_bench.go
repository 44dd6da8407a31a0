package flashattn

import (
	"fmt"
	"math/rand/v2"
)

// DecodeBenchResult is the timing of one decode problem by BenchKVCache.
// The embedded BenchResult's TFLOPS count Dims.FLOPs(false) (the causal
// mask of a decode step hides at most Nq-1 keys per row), over the entries a
// sliding window leaves; its ExtraBytes are the LSE and the split workspace.
type DecodeBenchResult struct {
	BenchResult
	// Splits is the number of KV splits the call used (1: no merge).
	Splits int
	// PageSize is the block size of the paged cache, 0 for a contiguous one.
	PageSize int
	// KVBytes is what the decode kernel must read of the cache: the K and V
	// rows of every sequence, B * Nk * Hkv * D * 2 tensors * 2 bytes (with a
	// sliding window of Left, its min(Nk, Left+Nq) last rows instead of Nk).
	KVBytes int64
	// TBps is KVBytes over the median time, in TB/s (1e12 bytes per second).
	TBps float64
}

// BenchKVCache times one decode call (Device.ForwardKVCache's kernels) of
// q (B, Nq, Hq, D) against a cache of dims.Nk entries per sequence (every
// SeqLens is Nk) on random fp16 data: contiguous for pageSize 0, else paged
// in blocks of pageSize (a multiple of PageMultiple dividing Nk), the blocks
// in a shuffled order. warmup untimed calls, then reps calls each timed with
// CUDA events, as BenchForward. o's Causal, Window, Softcap, ALiBi and Scale
// are used. All device memory is freed on return.
func (d *Device) BenchKVCache(dims Dims, pageSize int, o *Options, warmup, reps int) (DecodeBenchResult, error) {
	if reps < 1 || warmup < 0 {
		return DecodeBenchResult{}, &OptionError{Option: "reps/warmup", Value: fmt.Sprint(reps, warmup), Reason: "want reps >= 1, warmup >= 0"}
	}
	if err := dims.Validate(); err != nil {
		return DecodeBenchResult{}, err
	}
	c := KVCache{SeqLens: make([]int, dims.B)}
	for b := range c.SeqLens {
		c.SeqLens[b] = dims.Nk
	}
	cacheShape := dims.KVShape()
	if pageSize != 0 {
		if pageSize < 0 || pageSize%PageMultiple != 0 || dims.Nk%pageSize != 0 {
			return DecodeBenchResult{}, &OptionError{Option: "pageSize", Value: fmt.Sprint(pageSize),
				Reason: fmt.Sprintf("want a multiple of %d that divides Nk (%d)", PageMultiple, dims.Nk)}
		}
		// The dense (B, Nk, Hkv, D) data seen as B*Nk/pageSize blocks,
		// handed out to the sequences in a shuffled order.
		per := dims.Nk / pageSize
		cacheShape = Shape{B: dims.B * per, N: pageSize, H: dims.Hkv, D: dims.D}
		perm := rand.New(rand.NewPCG(uint64(dims.Nk), uint64(pageSize))).Perm(cacheShape.B)
		c.BlockSize, c.BlockTable = pageSize, make([][]int, dims.B)
		for b := range c.BlockTable {
			c.BlockTable[b] = perm[b*per : (b+1)*per]
		}
	}
	p, err := resolveKVShapes(dims.QShape(), cacheShape, cacheShape, c, o)
	if err != nil {
		return DecodeBenchResult{}, err
	}
	if err := d.lock(); err != nil {
		return DecodeBenchResult{}, err
	}
	defer d.mu.Unlock()
	// The kernels first: a problem they cannot run costs no device memory.
	if _, _, err := d.plan(planRequest{op: opDecode, p: p, dt: FP16, paged: c.BlockTable != nil}); err != nil {
		return DecodeBenchResult{}, err
	}
	in, err := d.benchInputs(p.Dims, FP16, false)
	defer func() { _ = freeAll(in) }()
	if err != nil {
		return DecodeBenchResult{}, err
	}
	// The cache tensors as the call sees them (the same memory, another shape).
	k := &DeviceTensor{dev: d, shape: cacheShape, dtype: FP16, buf: in[1].buf}
	v := &DeviceTensor{dev: d, shape: cacheShape, dtype: FP16, buf: in[2].buf}
	op, err := d.newDecode(p, c, in[0], k, v)
	if err != nil {
		return DecodeBenchResult{}, err
	}
	defer func() { _ = op.free() }()
	ks := op.kernels()
	oPart, lPart, counts := decodeWorkspace(p.Dims, op.splits, int(op.cfg.Grid[1]*op.cfg.Grid[2]))
	r := DecodeBenchResult{
		BenchResult: BenchResult{Dims: p.Dims, Kernel: ks[0], Kernels: ks, ExtraBytes: int64(p.LSEBytes()) + 4*int64(oPart+lPart+counts)},
		Splits:      op.splits, PageSize: pageSize, KVBytes: op.cacheBytes,
	}
	if err := d.timeCalls(&r.BenchResult, op, warmup, reps); err != nil {
		return DecodeBenchResult{}, err
	}
	r.Causal = p.Causal                                // after timeCalls, which counts FLOPs without the mask
	r.TFLOPS *= float64(decodeSpan(p)) / float64(p.Nk) // a window's FLOPs are its entries'
	r.TBps = float64(r.KVBytes) / (r.MedianMs * 1e-3) / 1e12
	return r, nil
}
