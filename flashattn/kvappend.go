package flashattn

import (
	"context"
	"fmt"
)

// In-place append (flash_attn_with_kvcache's k and v): a decode step writes
// its new tokens' keys and values into the cache at each sequence's length,
// then attends over the cache including them.

// CacheFullError is an append that does not fit: sequence Batch holds Len
// entries and New more would exceed its Capacity (Ncache, or its
// block-table row's blocks times BlockSize).
type CacheFullError struct {
	Batch, Len, New, Capacity int
}

func (e *CacheFullError) Error() string {
	return fmt.Sprintf("flashattn: KV cache full: batch %d holds %d entries, %d new ones exceed its capacity of %d", e.Batch, e.Len, e.New, e.Capacity)
}

// ReadOnlyCacheError is an append into cache memory that must not be
// written: kCache and vCache are one buffer, or a paged block the new
// entries land in is also in use by another sequence (or twice by one),
// as a shared prefix block is: copy it into a block of its own first.
type ReadOnlyCacheError struct {
	Reason string
}

func (e *ReadOnlyCacheError) Error() string {
	return "flashattn: KV cache is read-only here: " + e.Reason
}

// checkAppend checks the new entries kNew, vNew (B, Nnew, Hkv, D) against q
// and the cache c describes (already checked by resolveKVShapes) and
// returns c with each SeqLens[b] grown by Nnew (a new slice). sameKV: kCache
// and vCache share memory.
func checkAppend(q, kNew, vNew, kCache Shape, c KVCache, sameKV bool) (KVCache, error) {
	if err := expectShape("vNew", vNew, kNew); err != nil {
		return KVCache{}, err
	}
	for _, x := range []struct {
		dim       string
		got, want int
	}{{"B", kNew.B, q.B}, {"H", kNew.H, kCache.H}, {"D", kNew.D, kCache.D}} {
		if x.got != x.want {
			return KVCache{}, &ShapeError{Arg: "kNew", Dim: x.dim, Got: x.got, Want: fmt.Sprintf("== %d (the cache's)", x.want)}
		}
	}
	if kNew.N < 1 {
		return KVCache{}, &ShapeError{Arg: "kNew", Dim: "N", Got: kNew.N, Want: ">= 1"}
	}
	if sameKV {
		return KVCache{}, &ReadOnlyCacheError{Reason: "kCache and vCache are one buffer: the new keys would overwrite values"}
	}
	after := c
	after.SeqLens = make([]int, len(c.SeqLens))
	for b, n := range c.SeqLens {
		capacity := kCache.N
		if c.BlockTable != nil {
			capacity = len(c.BlockTable[b]) * c.BlockSize
		}
		if n+kNew.N > capacity {
			return KVCache{}, &CacheFullError{Batch: b, Len: n, New: kNew.N, Capacity: capacity}
		}
		after.SeqLens[b] = n + kNew.N
	}
	if c.BlockTable == nil {
		return after, nil
	}
	// A block written here must be used once: by this sequence, at one place.
	uses := map[int]int{}
	for b, n := range after.SeqLens {
		for _, blk := range c.BlockTable[b][:ceilDiv(n, c.BlockSize)] {
			uses[blk]++
		}
	}
	for b, n := range c.SeqLens {
		for i := n / c.BlockSize; i < ceilDiv(after.SeqLens[b], c.BlockSize); i++ {
			if blk := c.BlockTable[b][i]; uses[blk] > 1 {
				return KVCache{}, &ReadOnlyCacheError{Reason: fmt.Sprintf("batch %d appends into block %d (table entry %d), which the block table uses %d times", b, blk, i, uses[blk])}
			}
		}
	}
	return after, nil
}

// appendRuns calls f for each run of new entries that is contiguous in the
// cache: new rows [i, i+rows) of batch b land at row `row` of cache block (or
// batch) blk.
func appendRuns(c KVCache, nNew int, f func(b, i, blk, row, rows int) error) error {
	for b, n := range c.SeqLens {
		for i := 0; i < nNew; {
			pos, blk, row, rows := n+i, b, n+i, nNew-i
			if c.BlockTable != nil {
				blk, row = c.BlockTable[b][pos/c.BlockSize], pos%c.BlockSize
				rows = min(rows, c.BlockSize-row)
			}
			if err := f(b, i, blk, row, rows); err != nil {
				return err
			}
			i += rows
		}
	}
	return nil
}

// ForwardKVCacheAppend is ForwardKVCache with in-place append, as
// flash_attn_with_kvcache with k and v: kNew and vNew (B, Nnew, Hkv, D) are
// written into kCache and vCache at entries [SeqLens[b], SeqLens[b]+Nnew)
// of each sequence (through the block table when paged), then q attends over
// SeqLens[b]+Nnew entries. c.SeqLens are the lengths before the call and are
// not changed: the caller adds Nnew. The cache is written once every
// argument has been checked and the backend chosen; a *CacheFullError, a
// *ReadOnlyCacheError or any other refusal leaves it untouched.
func ForwardKVCacheAppend(q, kNew, vNew, kCache, vCache *Tensor, c KVCache, opts *Options) (*Result, error) {
	return ForwardKVCacheAppendContext(context.Background(), q, kNew, vNew, kCache, vCache, c, opts)
}

// ForwardKVCacheAppendContext is ForwardKVCacheAppend that stops early once
// ctx is done, as ForwardContext (the cache is then already written).
func ForwardKVCacheAppendContext(ctx context.Context, q, kNew, vNew, kCache, vCache *Tensor, c KVCache, opts *Options) (*Result, error) {
	if _, err := resolveKVCache(q, kCache, vCache, c, opts); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"kNew", kNew}, {"vNew", vNew}} {
		if err := a.t.check(a.name); err != nil {
			return nil, err
		}
	}
	same := kCache == vCache || &kCache.Data[0] == &vCache.Data[0]
	after, err := checkAppend(q.Shape, kNew.Shape, vNew.Shape, kCache.Shape, c, same)
	if err != nil {
		return nil, err
	}
	write := func() {
		_ = appendRuns(c, kNew.Shape.N, func(b, i, blk, row, rows int) error {
			for r := 0; r < rows; r++ {
				for h := 0; h < kNew.Shape.H; h++ {
					kCache.setRow(blk, row+r, h, kNew.Row(b, i+r, h))
					vCache.setRow(blk, row+r, h, vNew.Row(b, i+r, h))
				}
			}
			return nil
		})
	}
	return forwardKVCache(ctx, q, kCache, vCache, after, opts, write, kNew, vNew)
}
