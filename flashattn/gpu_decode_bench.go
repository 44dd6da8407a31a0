package flashattn

import (
	"fmt"
	"math/rand/v2"
)

// DecodeBenchResult is the timing of one decode problem by BenchKVCache,
// Bench's result, whose Splits, PageSize, KVBytes and TBps describe the
// decode call.
//
// Deprecated: Bench(OpKVCache, ...) returns the BenchResult.
type DecodeBenchResult struct {
	BenchResult
}

// kvBench is the decode problem Bench(OpKVCache) times: q (B, Nq, Hq, D)
// against a cache of dims.Nk entries per sequence (every SeqLens is Nk),
// contiguous for pageSize 0, else the dense (B, Nk, Hkv, D) data seen as
// B*Nk/pageSize blocks of pageSize entries handed out to the sequences in
// a shuffled order. It returns the cache's description and shape too.
func kvBench(dims Dims, pageSize int, o *Options) (problem, KVCache, Shape, error) {
	c := KVCache{SeqLens: make([]int, dims.B)}
	for b := range c.SeqLens {
		c.SeqLens[b] = dims.Nk
	}
	cacheShape := dims.KVShape()
	if pageSize != 0 {
		if pageSize < 0 || pageSize%PageMultiple != 0 || dims.Nk%pageSize != 0 {
			return problem{}, c, cacheShape, &OptionError{Option: "PageSize", Value: fmt.Sprint(pageSize),
				Reason: fmt.Sprintf("want a multiple of %d that divides Nk (%d)", PageMultiple, dims.Nk)}
		}
		per := dims.Nk / pageSize
		cacheShape = Shape{B: dims.B * per, N: pageSize, H: dims.Hkv, D: dims.D}
		perm := rand.New(rand.NewPCG(uint64(dims.Nk), uint64(pageSize))).Perm(cacheShape.B)
		c.BlockSize, c.BlockTable = pageSize, make([][]int, dims.B)
		for b := range c.BlockTable {
			c.BlockTable[b] = perm[b*per : (b+1)*per]
		}
	}
	p, err := resolveKVShapes(dims.QShape(), cacheShape, cacheShape, c, o)
	return p, c, cacheShape, err
}

// benchKVCache is Bench for OpKVCache (its arguments checked by
// checkBench).
func (d *Device) benchKVCache(dims Dims, dt DType, o *Options, cfg BenchConfig) (BenchResult, error) {
	if err := dims.Validate(); err != nil {
		return BenchResult{}, err
	}
	p, c, cacheShape, err := kvBench(dims, cfg.PageSize, o)
	if err != nil {
		return BenchResult{}, err
	}
	if err := d.lock(); err != nil {
		return BenchResult{}, err
	}
	defer d.mu.Unlock()
	// The kernels first: a problem they cannot run costs no device memory.
	if _, err := d.opKernels(OpKVCache, p, dt); err != nil {
		return BenchResult{}, err
	}
	in, err := d.benchInputs(p.Dims, dt, false)
	defer func() { _ = freeAll(in) }()
	if err != nil {
		return BenchResult{}, err
	}
	// The cache tensors as the call sees them (the same memory, another shape).
	k := &DeviceTensor{dev: d, shape: cacheShape, dtype: dt, buf: in[1].buf}
	v := &DeviceTensor{dev: d, shape: cacheShape, dtype: dt, buf: in[2].buf}
	op, err := d.newDecode(p, c, in[0], k, v)
	if err != nil {
		return BenchResult{}, err
	}
	defer func() { _ = op.free() }()
	ks := op.kernels()
	oPart, lPart, counts := decodeWorkspace(p.Dims, op.splits, int(op.cfg.Grid[1]*op.cfg.Grid[2]))
	r := BenchResult{Dims: p.Dims, Kernel: ks[0], Kernels: ks, ExtraBytes: int64(p.LSEBytes()) + 4*int64(oPart+lPart+counts),
		Splits: op.splits, PageSize: cfg.PageSize, KVBytes: op.cacheBytes}
	if err := d.timeCalls(&r, op, cfg.Warmup, cfg.Reps); err != nil {
		return BenchResult{}, err
	}
	r.Causal = p.Causal                                // after timeCalls, which counts FLOPs without the mask
	r.TFLOPS *= float64(decodeSpan(p)) / float64(p.Nk) // a window's FLOPs are its entries'
	r.PeakTFLOPS *= float64(decodeSpan(p)) / float64(p.Nk)
	r.TBps = float64(r.KVBytes) / (r.MedianMs * 1e-3) / 1e12
	return r, nil
}
