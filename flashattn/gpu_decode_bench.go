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

// benchDecode times a decode call of p (Bench's OpKVCache: kvBench's
// cache, paged by cfg.PageSize) on the random q and cache data in of dtype
// dt; d.mu is held.
func (d *Device) benchDecode(p problem, dt DType, cfg BenchConfig, in []*DeviceTensor) (BenchResult, error) {
	_, c, cacheShape, err := kvBench(p.Dims, cfg.PageSize, nil)
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
	r.Causal = p.Causal // after timeCalls, which counts FLOPs without the mask
	span := float64(decodeSpan(p)) / float64(p.Nk)
	r.TFLOPS *= span // a window's FLOPs are its entries'
	r.PeakTFLOPS *= span
	r.TBps = float64(r.KVBytes) / (r.MedianMs * 1e-3) / 1e12
	return r, nil
}
