package flashattn_test

import (
	"errors"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestKVCacheAppendAliasedCache: a cache view in which positions the append
// writes share an element with each other (kv heads on one storage), or with
// an entry in use (every row on one storage), is a *ReadOnlyCacheError that
// leaves the buffers as they were, on both CPU backends: the append would
// otherwise write one head's new entry over the other's, or overwrite entry 0.
func TestKVCacheAppendAliasedCache(t *testing.T) {
	for _, x := range []struct {
		what    string
		shape   flashattn.Shape
		strides flashattn.Strides
		n       int // elements of the buffer
	}{
		{"kv heads on one storage", flashattn.Shape{B: 1, N: 16, H: 2, D: 2}, flashattn.Strides{32, 2, 0, 1}, 32},
		{"every row on one storage", flashattn.Shape{B: 1, N: 16, H: 1, D: 2}, flashattn.Strides{0, 0, 0, 1}, 2},
		{"two batches on one storage", flashattn.Shape{B: 2, N: 16, H: 1, D: 2}, flashattn.Strides{0, 2, 2, 1}, 32},
	} {
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			s := x.shape
			q := flashattn.Random(flashattn.Shape{B: s.B, N: 1, H: s.H, D: s.D}, 1)
			kNew := flashattn.Random(flashattn.Shape{B: s.B, N: 1, H: s.H, D: s.D}, 2)
			vNew := flashattn.Random(kNew.Shape, 3)
			kc, err := flashattn.FromStrided(s, x.strides, flashattn.Random(flashattn.Shape{B: 1, N: x.n, H: 1, D: 1}, 4).Data)
			if err != nil {
				t.Fatal(err)
			}
			vc := flashattn.Random(s, 5)
			seq := make([]int, s.B)
			for b := range seq {
				seq[b] = 3
			}
			before := [][]float32{append([]float32(nil), kc.Data...), append([]float32(nil), vc.Data...)}
			for _, swap := range []bool{false, true} { // the aliased view as kCache, then as vCache
				k, v := kc, vc
				if swap {
					k, v = vc, kc
				}
				_, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, k, v, flashattn.KVCache{SeqLens: seq}, &flashattn.Options{Backend: be})
				var ro *flashattn.ReadOnlyCacheError
				if !errors.As(err, &ro) {
					t.Errorf("%s (swap %t), %v: %v, want a *ReadOnlyCacheError", x.what, swap, be, err)
				}
				if !bitsEqual(before[0], kc.Data) || !bitsEqual(before[1], vc.Data) {
					t.Errorf("%s (swap %t), %v: the refused call wrote the cache", x.what, swap, be)
					copy(kc.Data, before[0])
					copy(vc.Data, before[1])
				}
			}
		}
	}
}

// TestKVCacheAppendInputsInCache: kNew, vNew and q may be views of the cache,
// even of the rows the append writes: the call is as if every input were
// read before the first write. kNew = kCache rows [4, 7) appended at rows
// [5, 8) must give rows 4 5 6 there, not 4 4 4 (a forward copy reading rows
// it has already overwritten), and the result is that of dense copies.
func TestKVCacheAppendInputsInCache(t *testing.T) {
	sh := flashattn.Shape{B: 1, N: 12, H: 2, D: 4}
	for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		o := &flashattn.Options{Backend: be}
		c := flashattn.KVCache{SeqLens: []int{5}}
		kc, vc := flashattn.Random(sh, 1), flashattn.Random(sh, 2)
		view := func(t *flashattn.Tensor, r0, n int) *flashattn.Tensor {
			s := t.Shape
			s.N = n
			return &flashattn.Tensor{Shape: s, Strides: t.Strides, Data: t.Data[t.Offset(0, r0, 0, 0):]}
		}
		kNew, vNew := view(kc, 4, 3), view(vc, 4, 3)
		q := view(kc, 5, 1) // the first row the append writes, as q (Hq = Hkv)
		// The same call on dense copies of the inputs, into copies of the caches.
		kc2, vc2 := kc.Clone(), vc.Clone()
		want, err := flashattn.ForwardKVCacheAppend(q.Clone(), kNew.Clone(), vNew.Clone(), kc2, vc2, c, o)
		if err != nil {
			t.Fatal(err)
		}
		old := [][]float32{append([]float32(nil), kc.Data...), append([]float32(nil), vc.Data...)}
		got, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o)
		if err != nil {
			t.Fatalf("%v: %v", be, err)
		}
		for r := 5; r < 8; r++ {
			for h := 0; h < sh.H; h++ {
				for x := 0; x < sh.D; x++ {
					i := kc.Offset(0, r-1, h, x)
					if kc.At(0, r, h, x) != old[0][i] || vc.At(0, r, h, x) != old[1][i] {
						t.Fatalf("%v: cache row %d (h %d, x %d) is %v / %v, want old row %d's %v / %v", be, r, h, x,
							kc.At(0, r, h, x), vc.At(0, r, h, x), r-1, old[0][i], old[1][i])
					}
				}
			}
		}
		if !bitsEqual(kc.Data, kc2.Data) || !bitsEqual(vc.Data, vc2.Data) {
			t.Errorf("%v: the caches differ from those of dense inputs", be)
		}
		if !bitsEqual(got.Out.Data, want.Out.Data) || !bitsEqual(got.LSE, want.LSE) {
			t.Errorf("%v: the result differs from that of dense inputs", be)
		}
	}
}
