package flashattn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestKVCacheAppendDeviceFailureRestores: on the GPU the host cache is
// written before the upload (which reads the new entries from it), so a
// device failure after the write (out of memory at the upload, here
// injected in place of the device call that forwardKVCache's GPU branch
// makes through runAppended) must put the cache back: the call fails with
// the cache as it was, contiguous and paged, strided too. A call that
// succeeds keeps the new entries.
func TestKVCacheAppendDeviceFailureRestores(t *testing.T) {
	kNew := Random(Shape{B: 2, N: 3, H: 2, D: 4}, 1)
	vNew := Random(kNew.Shape, 2)
	strided := func(s Shape, seed uint64) *Tensor { // D stride 2: Row copies
		buf := Random(Shape{B: 1, N: 1, H: 1, D: 2 * s.Numel()}, seed).Data
		st := s.ContiguousStrides()
		for i := range st {
			st[i] *= 2
		}
		x, err := FromStrided(s, st, buf)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, x := range []struct {
		what   string
		kc, vc *Tensor
		c      KVCache
	}{
		{"contiguous", Random(Shape{B: 2, N: 20, H: 2, D: 4}, 3), Random(Shape{B: 2, N: 20, H: 2, D: 4}, 4), KVCache{SeqLens: []int{3, 17}}},
		{"contiguous, strided", strided(Shape{B: 2, N: 20, H: 2, D: 4}, 3), strided(Shape{B: 2, N: 20, H: 2, D: 4}, 4), KVCache{SeqLens: []int{0, 5}}},
		{"paged", Random(Shape{B: 4, N: 16, H: 2, D: 4}, 5), Random(Shape{B: 4, N: 16, H: 2, D: 4}, 6),
			KVCache{SeqLens: []int{14, 2}, BlockTable: [][]int{{3, 1}, {0}}, BlockSize: 16}},
	} {
		before := [][]float32{append([]float32(nil), x.kc.Data...), append([]float32(nil), x.vc.Data...)}
		write := appendWriter(kNew, vNew, x.kc, x.vc, x.c)
		appendNow := func() (func(), error) { return write(), nil }
		b, n := 1, x.c.SeqLens[1] // where batch 1's first new entry lands
		blk, row := b, n
		if x.c.BlockTable != nil {
			blk, row = x.c.BlockTable[b][n/x.c.BlockSize], n%x.c.BlockSize
		}
		sawNew := false
		_, err := runAppended(appendNow, func() (*Result, error) {
			sawNew = x.kc.At(blk, row, 1, 3) == kNew.At(b, 0, 1, 3) && x.vc.At(blk, row, 1, 3) == vNew.At(b, 0, 1, 3)
			return nil, fmt.Errorf("flashattn: uploading kCache: %w", ErrOutOfMemory)
		})
		if !sawNew {
			t.Errorf("%s: the device call did not see the new entries in the cache", x.what)
		}
		if !errors.Is(err, ErrOutOfMemory) {
			t.Errorf("%s: %v, want the device's ErrOutOfMemory", x.what, err)
		}
		if !sameBits(before[0], x.kc.Data) || !sameBits(before[1], x.vc.Data) {
			t.Errorf("%s: a device failure left the cache written", x.what)
		}
		want := &Result{}
		res, err := runAppended(appendNow, func() (*Result, error) { return want, nil })
		if err != nil || res != want {
			t.Fatalf("%s: a call that succeeds: %v, %v", x.what, res, err)
		}
		if x.kc.At(blk, row, 1, 3) != kNew.At(b, 0, 1, 3) || x.vc.At(blk, row, 1, 3) != vNew.At(b, 0, 1, 3) {
			t.Errorf("%s: a call that succeeds lost the new entries", x.what)
		}
	}
}
