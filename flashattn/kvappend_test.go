package flashattn_test

import (
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
