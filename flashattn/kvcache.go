package flashattn

import (
	"context"
	"fmt"
	"math"
)

// KVCache describes the key/value cache of a decode call: a few query rows
// per sequence (the new tokens) against each sequence's cached keys. The
// cache is either contiguous, kCache and vCache (B, Ncache, Hkv, D) with
// batch b's keys in rows [0, SeqLens[b]), or paged as vLLM keeps it:
// kCache and vCache (numBlocks, BlockSize, Hkv, D), entry n of batch b
// lying in block BlockTable[b][n / BlockSize] at row n % BlockSize.
// Masks and ALiBi are aligned to each sequence's bottom-right corner
// (offset SeqLens[b] - Nq): query row i is cache position SeqLens[b]-Nq+i,
// as when the new tokens' keys were appended to the cache before the call.
type KVCache struct {
	// SeqLens[b] is the number of valid cache entries of batch b (0: its
	// rows see no key, output 0 and LSE -Inf).
	SeqLens []int
	// BlockTable, when non-nil, makes the cache paged: one row of block
	// indices per batch, covering at least SeqLens[b] entries.
	BlockTable [][]int
	// BlockSize is the entries per block of a paged cache: a positive
	// multiple of PageMultiple. It must be 0 for a contiguous one.
	BlockSize int
}

// PageMultiple is what a paged cache's BlockSize must be a multiple of: the
// GPU decode kernels read one block-table entry per that many rows
// (kernels/decode.cuh's kPageMultiple).
const PageMultiple = 16

// kvCall is one KV-cache call after its checks: the problem (Nk the
// largest SeqLens, for the options and the backend choice) and the cache.
type kvCall struct {
	p              problem
	c              KVCache
	kCache, vCache *Tensor
}

// kvEntry is the entry name of KV-cache problems (problem.entry).
const kvEntry = "KV cache"

// resolveKVCache checks a KV-cache call's tensors, cache description and options.
func resolveKVCache(q, kCache, vCache *Tensor, c KVCache, opts *Options) (kvCall, error) {
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"q", q}, {"kCache", kCache}, {"vCache", vCache}} {
		if err := a.t.check(a.name); err != nil {
			return kvCall{}, err
		}
	}
	p, err := resolveKVShapes(q.Shape, kCache.Shape, vCache.Shape, c, opts)
	if err != nil {
		return kvCall{}, err
	}
	return kvCall{p: p, c: c, kCache: kCache, vCache: vCache}, nil
}

// resolveKVShapes checks a KV-cache call's shapes, cache description and
// options (host or device tensors) and returns its problem: Nk is the
// largest SeqLens (at least 1).
func resolveKVShapes(q, kCache, vCache Shape, c KVCache, opts *Options) (problem, error) {
	if err := expectShape("vCache", vCache, kCache); err != nil {
		return problem{}, err
	}
	if len(c.SeqLens) != q.B {
		return problem{}, &DataError{Arg: "SeqLens", Reason: fmt.Sprintf("has %d entries, q's B is %d", len(c.SeqLens), q.B)}
	}
	// capacity is how many entries batch b's part of the cache holds.
	capacity := func(int) int { return kCache.N }
	if c.BlockTable == nil {
		if c.BlockSize != 0 {
			return problem{}, &OptionError{Option: "BlockSize", Value: fmt.Sprint(c.BlockSize), Reason: "a contiguous cache (no BlockTable) has no blocks: want 0"}
		}
		if kCache.B != q.B {
			return problem{}, &ShapeError{Arg: "kCache", Dim: "B", Got: kCache.B, Want: fmt.Sprintf("== %d (q's B; a paged cache has a BlockTable)", q.B)}
		}
	} else {
		if c.BlockSize < 1 || c.BlockSize%PageMultiple != 0 {
			return problem{}, &OptionError{Option: "BlockSize", Value: fmt.Sprint(c.BlockSize), Reason: fmt.Sprintf("want a positive multiple of %d", PageMultiple)}
		}
		if kCache.N != c.BlockSize {
			return problem{}, &ShapeError{Arg: "kCache", Dim: "N", Got: kCache.N, Want: fmt.Sprintf("== BlockSize (%d): a paged cache is (blocks, BlockSize, Hkv, D)", c.BlockSize)}
		}
		if len(c.BlockTable) != q.B {
			return problem{}, &DataError{Arg: "BlockTable", Reason: fmt.Sprintf("has %d rows, q's B is %d", len(c.BlockTable), q.B)}
		}
		capacity = func(b int) int { return len(c.BlockTable[b]) * c.BlockSize }
	}
	d := Dims{B: q.B, Nq: q.N, Hq: q.H, Hkv: kCache.H, D: q.D}
	for b, n := range c.SeqLens {
		if n < 0 || n > capacity(b) {
			return problem{}, &DataError{Arg: "SeqLens", Reason: fmt.Sprintf("batch %d has %d entries, its cache holds 0 to %d", b, n, capacity(b))}
		}
		if c.BlockTable != nil && n > 0 {
			for i, blk := range c.BlockTable[b][:ceilDiv(n, c.BlockSize)] { // the blocks in use
				if blk < 0 || blk >= kCache.B {
					return problem{}, &DataError{Arg: "BlockTable", Reason: fmt.Sprintf("batch %d, block %d is %d: the cache has blocks 0 to %d", b, i, blk, kCache.B-1)}
				}
			}
		}
		d.Nk = max(d.Nk, n)
	}
	d.Nk = max(d.Nk, 1) // the options are checked for a problem with a key
	if err := d.Validate(); err != nil {
		return problem{}, err
	}
	if kCache.D != d.D {
		return problem{}, &ShapeError{Arg: "kCache", Dim: "D", Got: kCache.D, Want: fmt.Sprintf("== %d", d.D)}
	}
	if opts != nil && opts.Trace != nil {
		return problem{}, &OptionError{Option: "Trace", Value: "set", Reason: "a KV-cache call records no trace"}
	}
	p, err := opts.resolve(d)
	if err != nil {
		return problem{}, err
	}
	p.entry = kvEntry
	return p, nil
}

// seq is the problem of batch b alone: its own Nk, B = 1.
func (k kvCall) seq(b int) problem {
	p := k.p
	p.B, p.Nk, p.entry = 1, k.c.SeqLens[b], ""
	return p
}

// batch is the view of batch b of t, as a tensor of B = 1.
func (t *Tensor) batch(b int) *Tensor {
	s := t.Shape
	s.B = 1
	return &Tensor{Shape: s, Strides: t.Strides, Data: t.Data[t.Offset(b, 0, 0, 0):]}
}

// keys returns batch b's first n cache entries of t as a (1, n, Hkv, D)
// tensor: a view of a contiguous cache, a dense copy of a paged one's blocks.
func (k kvCall) keys(t *Tensor, b, n int) *Tensor {
	if k.c.BlockTable == nil {
		return t.batch(b).rows(0, n)
	}
	s := t.Shape
	s.B, s.N = 1, n
	g := &Tensor{Shape: s, Strides: s.ContiguousStrides(), Data: make([]float32, s.Numel())}
	for i := 0; i < n; i++ {
		blk := k.c.BlockTable[b][i/k.c.BlockSize]
		for h := 0; h < s.H; h++ {
			t.rowInto(g.Row(0, i, h), blk, i%k.c.BlockSize, h)
		}
	}
	return g
}

// ForwardKVCache is Forward for decoding: q (B, Nq, Hq, D), usually a few
// rows per sequence, against the cache c describes. Result.Out is
// (B, Nq, Hq, D) and Result.LSE (B, Hq, Nq). On the GPU the whole batch is
// one decode call (Device.ForwardKVCache after uploading q and the caches),
// windows, softcap and ALiBi included.
func ForwardKVCache(q, kCache, vCache *Tensor, c KVCache, opts *Options) (*Result, error) {
	return ForwardKVCacheContext(context.Background(), q, kCache, vCache, c, opts)
}

// ForwardKVCacheContext is ForwardKVCache that stops early once ctx is
// done, as ForwardContext.
func ForwardKVCacheContext(ctx context.Context, q, kCache, vCache *Tensor, c KVCache, opts *Options) (*Result, error) {
	return forwardKVCache(ctx, q, kCache, vCache, c, opts, nil)
}

// forwardKVCache is ForwardKVCacheContext; an in-place append passes its new
// entries (picked on with the rest) and write, which runs once every check,
// the backend choice and the memory reservation have passed, if ctx is not
// done by then, and returns its undo.
func forwardKVCache(ctx context.Context, q, kCache, vCache *Tensor, c KVCache, opts *Options, write func() (undo func()), news ...*Tensor) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flashattn: ForwardKVCache: %w", err)
	}
	kc, err := resolveKVCache(q, kCache, vCache, c, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(kc.p, opts, false, append([]*Tensor{q, kCache, vCache}, news...)...)
	if err != nil {
		return nil, err
	}
	// An append writes the cache after the last refusal (the memory
	// reservation below), and only while ctx is live.
	appendNow := func() (undo func(), err error) {
		if write == nil {
			return func() {}, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("flashattn: ForwardKVCache: %w", err)
		}
		return write(), nil
	}
	d := kc.p.Dims
	if g, ok := im.(gpuImpl); ok { // the whole batch in one decode call
		return runAppended(appendNow, func() (*Result, error) {
			res, err := g.dev.ForwardKVCacheHost(q, kCache, vCache, c, opts)
			return res, lostDefault(g.dev, err)
		})
	}
	// Outputs, plus the largest batch's scratch and (paged) its gathered k and v.
	var most float64
	for b, n := range c.SeqLens {
		if n > 0 {
			p := kc.seq(b)
			gathered := 0
			if c.BlockTable != nil {
				gathered = 2 * p.KVShape().Numel()
			}
			most = max(most, im.hostBytes(p, opts, false)+floats(gathered))
		}
	}
	if err := reserve(fmt.Sprintf("ForwardKVCache of %+v on %s", d, be), floats(d.QShape().Numel(), d.LSELen())+most); err != nil {
		return nil, err
	}
	if _, err := appendNow(); err != nil {
		return nil, err
	}
	out, lse := newOutput(d.QShape()), newBuffer(d.LSELen())
	for b, n := range c.SeqLens {
		ob, lb := out.batch(b), lse[d.LSEIndex(b, 0, 0):][:d.Hq*d.Nq] // batch b's LSE is (Hq, Nq), contiguous
		if n == 0 {
			for i := 0; i < d.Nq; i++ {
				for h := 0; h < d.Hq; h++ {
					clear(ob.Row(0, i, h))
				}
			}
			for i := range lb {
				lb[i] = float32(math.Inf(-1))
			}
			continue
		}
		if err := im.forward(ctx, kc.seq(b), q.batch(b), kc.keys(kCache, b, n), kc.keys(vCache, b, n), opts, ob, lb); err != nil {
			return nil, err
		}
	}
	return &Result{Dims: d, Out: out, LSE: lse, Backend: be, Reason: reason}, nil
}

// runAppended writes an append (appendNow) and runs the call that reads it
// from the cache (the GPU's: upload, decode, download). The host cache must
// hold the new entries for the upload, so the write comes first; when the
// call fails (device memory full at the upload, a fault), the write is
// undone, and a failed call leaves the cache as it was.
func runAppended(appendNow func() (undo func(), err error), run func() (*Result, error)) (*Result, error) {
	undo, err := appendNow()
	if err != nil {
		return nil, err
	}
	res, err := run()
	if err != nil {
		undo()
		return nil, err
	}
	return res, nil
}
