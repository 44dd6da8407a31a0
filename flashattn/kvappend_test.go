package flashattn_test

import (
	"context"
	"errors"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestKVCacheAppendErrors: an append that does not fit or would write
// memory another entry uses is a typed error, and the cache stays as it
// was; an append filling a cache to its last entry runs.
func TestKVCacheAppendErrors(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 2, D: 8}, 1)
	kNew := flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 1, D: 8}, 2)
	vNew := flashattn.Random(kNew.Shape, 3)
	kc := flashattn.Random(flashattn.Shape{B: 2, N: 40, H: 1, D: 8}, 4)
	vc := flashattn.Random(kc.Shape, 5)
	pk := flashattn.Random(flashattn.Shape{B: 5, N: 16, H: 1, D: 8}, 6)
	pv := flashattn.Random(pk.Shape, 7)
	var (
		full *flashattn.CacheFullError
		ro   *flashattn.ReadOnlyCacheError
		se   *flashattn.ShapeError
	)
	for _, c := range []struct {
		what       string
		kn, k, v   *flashattn.Tensor
		c          flashattn.KVCache
		o          *flashattn.Options
		target     any
		wantDetail func() bool
	}{
		{"contiguous-full", kNew, kc, vc, flashattn.KVCache{SeqLens: []int{3, 39}}, nil, &full,
			func() bool { return full.Batch == 1 && full.Len == 39 && full.New == 2 && full.Capacity == 40 }},
		{"paged-full", kNew, pk, pv, flashattn.KVCache{SeqLens: []int{3, 31}, BlockTable: [][]int{{0}, {1, 2}}, BlockSize: 16}, nil, &full,
			func() bool { return full.Batch == 1 && full.Capacity == 32 }},
		{"one-buffer", kNew, kc, kc, flashattn.KVCache{SeqLens: []int{3, 4}}, nil, &ro, func() bool { return true }},
		// Block 2 is a shared prefix of both sequences; batch 0 appends into it.
		{"shared-block", kNew, pk, pv, flashattn.KVCache{SeqLens: []int{3, 20}, BlockTable: [][]int{{2}, {2, 3}}, BlockSize: 16}, nil, &ro, func() bool { return true }},
		{"same-block-twice", kNew, pk, pv, flashattn.KVCache{SeqLens: []int{15, 4}, BlockTable: [][]int{{0, 0}, {1}}, BlockSize: 16}, nil, &ro, func() bool { return true }},
		{"kNew-heads", flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 2, D: 8}, 8), kc, vc, flashattn.KVCache{SeqLens: []int{3, 4}}, nil, &se,
			func() bool { return se.Arg == "kNew" && se.Dim == "H" }},
		{"kNew-B", flashattn.Random(flashattn.Shape{B: 1, N: 2, H: 1, D: 8}, 8), kc, vc, flashattn.KVCache{SeqLens: []int{3, 4}}, nil, &se,
			func() bool { return se.Arg == "kNew" && se.Dim == "B" }},
	} {
		before := [][]float32{append([]float32(nil), c.k.Data...), append([]float32(nil), c.v.Data...)}
		vn := vNew
		if c.kn.Shape != kNew.Shape {
			vn = c.kn
		}
		_, err := flashattn.ForwardKVCacheAppend(q, c.kn, vn, c.k, c.v, c.c, c.o)
		if !errors.As(err, c.target) || !c.wantDetail() {
			t.Errorf("%s: %v, want a %T", c.what, err, c.target)
		}
		if !bitsEqual(before[0], c.k.Data) || !bitsEqual(before[1], c.v.Data) {
			t.Errorf("%s: the refused call wrote the cache", c.what)
		}
	}
	// Filling each sequence to its last entry, contiguous and paged.
	if _, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, flashattn.KVCache{SeqLens: []int{38, 0}}, nil); err != nil {
		t.Errorf("append to the last entry: %v", err)
	}
	if _, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, pk, pv, flashattn.KVCache{SeqLens: []int{14, 30}, BlockTable: [][]int{{0}, {1, 2}}, BlockSize: 16}, nil); err != nil {
		t.Errorf("paged append to the last entry: %v", err)
	}
}

// TestKVCacheAppendViews: kCache and vCache may be views of one buffer as
// long as the append writes no element the other holds in use. K and V
// interleaved in one packed (B, N, 2, Hkv, D) buffer append and attend as
// two separate caches do; views that overlap are a *ReadOnlyCacheError
// that leaves the buffer as it was, contiguous and paged.
func TestKVCacheAppendViews(t *testing.T) {
	sh := flashattn.Shape{B: 2, N: 40, H: 2, D: 8}
	q := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 4, D: 8}, 1)
	kNew := flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 2, D: 8}, 2)
	vNew := flashattn.Random(kNew.Shape, 3)
	c := flashattn.KVCache{SeqLens: []int{3, 17}}
	o := &flashattn.Options{Backend: flashattn.CPUFlash}
	kc, vc := flashattn.Random(sh, 4), flashattn.Random(sh, 5)
	want, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o)
	if err != nil {
		t.Fatal(err)
	}

	row := sh.H * sh.D // one entry of one of K and V
	buf := make([]float32, 2*sh.Numel())
	st := flashattn.Strides{2 * sh.N * row, 2 * row, sh.D, 1}
	pk, err1 := flashattn.FromStrided(sh, st, buf)
	pv, err2 := flashattn.FromStrided(sh, st, buf[row:])
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	kc, vc = flashattn.Random(sh, 4), flashattn.Random(sh, 5) // the caches before the append
	for b := range sh.B {
		for n := range sh.N {
			for h := range sh.H {
				for x := range sh.D {
					pk.Set(b, n, h, x, kc.At(b, n, h, x))
					pv.Set(b, n, h, x, vc.At(b, n, h, x))
				}
			}
		}
	}
	got, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, pk, pv, c, o)
	if err != nil {
		t.Fatalf("packed KV buffer: %v", err)
	}
	if !bitsEqual(got.Out.Data, want.Out.Data) || !bitsEqual(got.LSE, want.LSE) {
		t.Errorf("packed KV buffer: the output differs from separate caches'")
	}
	if pk.At(1, 18, 1, 7) != kNew.At(1, 1, 1, 7) || pv.At(1, 18, 1, 7) != vNew.At(1, 1, 1, 7) || pk.At(0, 2, 0, 0) != kc.At(0, 2, 0, 0) {
		t.Errorf("packed KV buffer: the new entries are not where they belong")
	}

	var ro *flashattn.ReadOnlyCacheError
	pb := flashattn.Random(flashattn.Shape{B: 6, N: 16, H: 2, D: 8}, 6).Data
	for _, x := range []struct {
		what       string
		data       []float32
		kOff, vOff int // element offsets of the two views
		shape      flashattn.Shape
		c          flashattn.KVCache
	}{
		// V is K one entry later: K's new entry 3 is V's entry 2, in use.
		{"contiguous, one entry apart", append([]float32(nil), buf...), 0, row, sh, c},
		// V's block b is K's block b+1: batch 1's new value lands in K's
		// block 2, which batch 1's keys use.
		{"paged, one block apart", pb, 0, 16 * row, flashattn.Shape{B: 5, N: 16, H: 2, D: 8},
			flashattn.KVCache{SeqLens: []int{3, 20}, BlockTable: [][]int{{0}, {2, 1}}, BlockSize: 16}},
	} {
		n := x.shape.Numel()
		k, err1 := flashattn.FromSlice(x.shape, x.data[x.kOff:x.kOff+n])
		v, err2 := flashattn.FromSlice(x.shape, x.data[x.vOff:x.vOff+n])
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		before := append([]float32(nil), x.data...)
		_, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, k, v, x.c, o)
		if !errors.As(err, &ro) {
			t.Errorf("%s: %v, want a *ReadOnlyCacheError", x.what, err)
		}
		if !bitsEqual(before, x.data) {
			t.Errorf("%s: the refused call wrote the buffer", x.what)
		}
	}
}

// TestKVCacheAppendLateRefusals: refusals that come after the argument
// checks, a host memory limit and a context already done, leave the cache
// as it was too.
func TestKVCacheAppendLateRefusals(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 2, D: 8}, 1)
	kNew := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 1, D: 8}, 2)
	vNew := flashattn.Random(kNew.Shape, 3)
	kc := flashattn.Random(flashattn.Shape{B: 2, N: 40, H: 1, D: 8}, 4)
	vc := flashattn.Random(kc.Shape, 5)
	c := flashattn.KVCache{SeqLens: []int{3, 20}}
	o := &flashattn.Options{Backend: flashattn.CPUFlash}
	before := [][]float32{append([]float32(nil), kc.Data...), append([]float32(nil), vc.Data...)}
	unchanged := func(what string) {
		if !bitsEqual(before[0], kc.Data) || !bitsEqual(before[1], vc.Data) {
			t.Errorf("%s: the refused call wrote the cache", what)
		}
	}

	old := flashattn.SetHostMemoryLimit(64)
	_, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o)
	flashattn.SetHostMemoryLimit(old)
	var me *flashattn.MemoryError
	if !errors.As(err, &me) {
		t.Errorf("under a 64-byte memory limit: %v, want a *MemoryError", err)
	}
	unchanged("memory limit")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := flashattn.ForwardKVCacheAppendContext(ctx, q, kNew, vNew, kc, vc, c, o); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: %v, want context.Canceled", err)
	}
	unchanged("cancelled context")

	if _, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o); err != nil || kc.At(1, 20, 0, 5) != kNew.At(1, 0, 0, 5) {
		t.Errorf("the same call without the limit: %v, or the new key is not at entry 20", err)
	}
}
