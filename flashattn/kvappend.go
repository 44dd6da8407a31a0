package flashattn

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"unsafe"
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
// written: kCache and vCache are one buffer (or views of one that the new
// entries of one would write where the other holds entries in use), or a
// paged block the new entries land in is also in use by another sequence
// (or twice by one), as a shared prefix block is: copy it into a block of
// its own first.
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

// appendClobbers reports whether an append of nNew entries per sequence
// (checked to fit; after is the cache with them) would write an element of
// one of kCache and vCache that the other holds in use (its entries below
// after's lengths, the new ones included): views of one buffer that
// overlap. Separate buffers, the usual case, and views that interleave
// without sharing an element in use (a packed KV buffer) do not.
func appendClobbers(kCache, vCache *Tensor, c, after KVCache, nNew int) bool {
	base := func(t *Tensor) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(t.Data))) }
	const f32 = 4
	if kb, vb := base(kCache), base(vCache); kb+f32*uintptr(len(kCache.Data)) <= vb || vb+f32*uintptr(len(vCache.Data)) <= kb {
		return false
	}
	// used[blk]: the rows of cache block (or batch) blk in use after the append.
	used := map[int]int{}
	for b, n := range after.SeqLens {
		if c.BlockTable == nil {
			used[b] = n
			continue
		}
		for i, blk := range c.BlockTable[b][:ceilDiv(n, c.BlockSize)] {
			used[blk] = max(used[blk], min(c.BlockSize, n-i*c.BlockSize))
		}
	}
	// inUse(t) tells whether address a is an element of t in use, found by
	// taking a's offset apart by t's strides, largest first (exact for a
	// layout in which no two elements share an offset, as every real
	// tensor's).
	inUse := func(t *Tensor) func(a uintptr) bool {
		ext, order := [4]int{t.Shape.B, t.Shape.N, t.Shape.H, t.Shape.D}, [4]int{0, 1, 2, 3}
		slices.SortStableFunc(order[:], func(x, y int) int { return cmp.Compare(t.Strides[y], t.Strides[x]) })
		return func(a uintptr) bool {
			if a < base(t) || (a-base(t))%f32 != 0 {
				return false
			}
			e := int((a - base(t)) / f32)
			var idx [4]int
			for _, k := range order {
				if s := t.Strides[k]; s > 0 {
					idx[k] = min(e/s, ext[k]-1)
					e -= idx[k] * s
				}
			}
			return e == 0 && idx[1] < used[idx[0]]
		}
	}
	clobbers := func(w, other *Tensor) bool {
		hit, held := false, inUse(other)
		_ = appendRuns(c, nNew, func(_, _, blk, r0, n int) error {
			for r := r0; r < r0+n && !hit; r++ {
				for h := 0; h < w.Shape.H && !hit; h++ {
					for x := 0; x < w.Shape.D && !hit; x++ {
						hit = held(base(w) + f32*uintptr(w.Offset(blk, r, h, x)))
					}
				}
			}
			return nil
		})
		return hit
	}
	return clobbers(kCache, vCache) || clobbers(vCache, kCache)
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
// not changed: the caller adds Nnew once the call succeeds. The cache is
// written once every argument has been checked, the backend chosen and the
// memory reserved; a *CacheFullError, a *ReadOnlyCacheError or any other
// refusal leaves it untouched.
func ForwardKVCacheAppend(q, kNew, vNew, kCache, vCache *Tensor, c KVCache, opts *Options) (*Result, error) {
	return ForwardKVCacheAppendContext(context.Background(), q, kNew, vNew, kCache, vCache, c, opts)
}

// ForwardKVCacheAppendContext is ForwardKVCacheAppend that stops early once
// ctx is done, as ForwardContext. A ctx done before the append leaves the
// cache untouched; one done after it stops the attention with the new entries
// already written. Either way the error wraps ctx.Err() and the caller keeps
// SeqLens as they were: entries past them are not part of the cache, and the
// next append overwrites them.
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
	if appendClobbers(kCache, vCache, c, after, kNew.Shape.N) {
		return nil, &ReadOnlyCacheError{Reason: "kCache and vCache are overlapping views of one buffer: the new values would overwrite new keys"}
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
