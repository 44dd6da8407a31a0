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
// entries of one would write where the other holds entries in use), a
// cache view gives two positions one element (heads, rows or batches on one
// storage, as a zero stride does: the append would write one new entry over
// another, or over an entry in use), or a paged block the new entries land
// in is also in use by another sequence (or twice by one), as a shared
// prefix block is: copy it into a block of its own first.
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
// refusal leaves it untouched, and so does a failure of the GPU after the
// write (the host cache is written before its upload, and put back). q,
// kNew and vNew may be views of the cache: those that share its memory are
// copied first, so the call is as if every input were read before the
// first write.
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
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"kCache", kCache}, {"vCache", vCache}} {
		if !a.t.nests() {
			return nil, &ReadOnlyCacheError{Reason: fmt.Sprintf("%s's strides %v give positions of its shape %v one element (a view whose heads, rows or batches share storage): the new entries would overwrite one another or entries in use", a.name, a.t.Strides, a.t.Shape)}
		}
	}
	if appendClobbers(kCache, vCache, c, after, kNew.Shape.N) {
		return nil, &ReadOnlyCacheError{Reason: "kCache and vCache are overlapping views of one buffer: the new values would overwrite new keys"}
	}
	// Inputs that are views of the cache are read before the first write:
	// copies of those that share its memory.
	ins := []*Tensor{q, kNew, vNew}
	for i, name := range []string{"q", "kNew", "vNew"} {
		if sharesMemory(ins[i], kCache) || sharesMemory(ins[i], vCache) {
			if ins[i], err = snapshot(name, ins[i]); err != nil {
				return nil, err
			}
		}
	}
	q, kNew, vNew = ins[0], ins[1], ins[2]
	return forwardKVCache(ctx, q, kCache, vCache, after, opts, appendWriter(kNew, vNew, kCache, vCache, c), kNew, vNew)
}

// appendWriter returns the write of an append of kNew and vNew into kCache
// and vCache at c's lengths. The write returns its undo, which puts back
// the elements it overwrote.
func appendWriter(kNew, vNew, kCache, vCache *Tensor, c KVCache) func() (undo func()) {
	return func() func() {
		var saved [][]float32 // k's and v's old row, in write order
		_ = appendRuns(c, kNew.Shape.N, func(b, i, blk, row, rows int) error {
			for r := 0; r < rows; r++ {
				for h := 0; h < kNew.Shape.H; h++ {
					saved = append(saved, kCache.Row(blk, row+r, h), vCache.Row(blk, row+r, h))
					if kCache.Strides[3] == 1 { // Row gave a view: keep a copy
						saved[len(saved)-2] = append([]float32(nil), saved[len(saved)-2]...)
					}
					if vCache.Strides[3] == 1 {
						saved[len(saved)-1] = append([]float32(nil), saved[len(saved)-1]...)
					}
					kCache.setRow(blk, row+r, h, kNew.Row(b, i+r, h))
					vCache.setRow(blk, row+r, h, vNew.Row(b, i+r, h))
				}
			}
			return nil
		})
		return func() {
			at := len(saved)
			var runs [][3]int // blk, row, rows
			_ = appendRuns(c, kNew.Shape.N, func(_, _, blk, row, rows int) error {
				runs = append(runs, [3]int{blk, row, rows})
				return nil
			})
			for x := len(runs) - 1; x >= 0; x-- { // in reverse order of the writes
				blk, row, rows := runs[x][0], runs[x][1], runs[x][2]
				for r := rows - 1; r >= 0; r-- {
					for h := kNew.Shape.H - 1; h >= 0; h-- {
						at -= 2
						vCache.setRow(blk, row+r, h, saved[at+1])
						kCache.setRow(blk, row+r, h, saved[at])
					}
				}
			}
		}
	}
}

// nests reports whether t's strides give every position of its shape an
// element of its own by nesting: taken by increasing stride, each dimension
// of extent above 1 steps past every offset the smaller ones reach (a
// dense tensor's layout, a permutation of it, or a view of a larger buffer
// such as a packed KV one). A layout that does not nest (a zero stride, two
// dimensions of one stride, steps that interleave) is taken as one whose
// positions may share elements.
func (t *Tensor) nests() bool {
	ext, order := [4]int{t.Shape.B, t.Shape.N, t.Shape.H, t.Shape.D}, [4]int{0, 1, 2, 3}
	slices.SortStableFunc(order[:], func(x, y int) int { return cmp.Compare(t.Strides[x], t.Strides[y]) })
	reach := 0 // the largest offset the dimensions so far reach
	for _, k := range order {
		if ext[k] == 1 {
			continue
		}
		if t.Strides[k] <= reach {
			return false
		}
		reach += t.Strides[k] * (ext[k] - 1)
	}
	return true
}

// sharesMemory reports whether a's and b's data slices overlap.
func sharesMemory(a, b *Tensor) bool {
	if len(a.Data) == 0 || len(b.Data) == 0 {
		return false
	}
	const f32 = 4
	base := func(t *Tensor) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(t.Data))) }
	return base(a) < base(b)+f32*uintptr(len(b.Data)) && base(b) < base(a)+f32*uintptr(len(a.Data))
}

// snapshot is a dense copy of t (a *MemoryError beyond HostMemoryLimit).
func snapshot(name string, t *Tensor) (*Tensor, error) {
	if err := reserve(fmt.Sprintf("copy of %s %v", name, t.Shape), floats(t.Shape.Numel())); err != nil {
		return nil, err
	}
	s := t.Shape
	c := &Tensor{Shape: s, Strides: s.ContiguousStrides(), Data: make([]float32, s.Numel())}
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				t.rowInto(c.Row(b, n, h), b, n, h)
			}
		}
	}
	return c, nil
}
