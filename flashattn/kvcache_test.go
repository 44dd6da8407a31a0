package flashattn_test

import (
	"errors"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestKVCacheAlone: on the CPU, ForwardKVCache gives each batch of the
// suite's decode cases, contiguous or paged, bit for bit what Forward gives
// it on its first SeqLens[b] keys alone (attntest checks both against the
// truth, and the empty caches).
func TestKVCacheAlone(t *testing.T) {
	for _, c := range attntest.KVCases() {
		cpuBackends(t, c.Name, c.Options(), func(t *testing.T, o *flashattn.Options) {
			q, kc, vc, k, v, cache := c.Inputs()
			res, err := flashattn.ForwardKVCache(q, k, v, cache, o)
			if err != nil {
				t.Fatal(err)
			}
			d := res.Dims
			for b, n := range c.SeqLens {
				if n == 0 {
					continue
				}
				alone, err := flashattn.Forward(attntest.Rows(q, b, 0, c.Nq), attntest.Rows(kc, b, 0, n), attntest.Rows(vc, b, 0, n), o)
				if err != nil {
					t.Fatal(err)
				}
				if !bitsEqual(attntest.Rows(res.Out, b, 0, c.Nq).Data, alone.Out.Data) || !bitsEqual(res.LSE[d.LSEIndex(b, 0, 0):][:c.Hq*c.Nq], alone.LSE) {
					t.Errorf("batch %d (%d entries): differs from Forward on its keys alone", b, n)
				}
			}
		})
	}
}

// TestKVCacheErrors: a cache description that does not fit is a typed
// error, and the GPU refuses decode with a window (before looking for a
// device; Auto runs it on the CPU, saying why).
func TestKVCacheErrors(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 2, D: 8}, 1)
	kc := flashattn.Random(flashattn.Shape{B: 2, N: 40, H: 1, D: 8}, 2)
	pk := flashattn.Random(flashattn.Shape{B: 5, N: 16, H: 1, D: 8}, 3)
	table := [][]int{{0, 1, 2}, {3, 4}}
	type want struct{ kind, name string }
	for _, c := range []struct {
		what   string
		k      *flashattn.Tensor
		c      flashattn.KVCache
		o      *flashattn.Options
		expect want
	}{
		{"SeqLens-short", kc, flashattn.KVCache{SeqLens: []int{3}}, nil, want{"data", "SeqLens"}},
		{"SeqLens-beyond-cache", kc, flashattn.KVCache{SeqLens: []int{3, 41}}, nil, want{"data", "SeqLens"}},
		{"SeqLens-negative", kc, flashattn.KVCache{SeqLens: []int{-1, 4}}, nil, want{"data", "SeqLens"}},
		{"BlockSize-without-table", kc, flashattn.KVCache{SeqLens: []int{3, 4}, BlockSize: 16}, nil, want{"option", "BlockSize"}},
		{"cache-B", pk, flashattn.KVCache{SeqLens: []int{3, 4}}, nil, want{"shape", "kCache"}},
		{"BlockSize-not-16x", pk, flashattn.KVCache{SeqLens: []int{3, 4}, BlockTable: table, BlockSize: 8}, nil, want{"option", "BlockSize"}},
		{"BlockSize-not-cache-N", pk, flashattn.KVCache{SeqLens: []int{3, 4}, BlockTable: table, BlockSize: 32}, nil, want{"shape", "kCache"}},
		{"table-rows", pk, flashattn.KVCache{SeqLens: []int{3, 4}, BlockTable: table[:1], BlockSize: 16}, nil, want{"data", "BlockTable"}},
		{"SeqLens-beyond-table", pk, flashattn.KVCache{SeqLens: []int{3, 33}, BlockTable: table, BlockSize: 16}, nil, want{"data", "SeqLens"}},
		{"block-out-of-range", pk, flashattn.KVCache{SeqLens: []int{3, 17}, BlockTable: [][]int{{0}, {4, 5}}, BlockSize: 16}, nil, want{"data", "BlockTable"}},
		{"block-negative", pk, flashattn.KVCache{SeqLens: []int{3, 4}, BlockTable: [][]int{{-1}, {4}}, BlockSize: 16}, nil, want{"data", "BlockTable"}},
		{"alibi-length", kc, flashattn.KVCache{SeqLens: []int{3, 4}}, &flashattn.Options{ALiBi: []float64{1}}, want{"option", "ALiBi"}},
	} {
		_, err := flashattn.ForwardKVCache(q, c.k, c.k, c.c, c.o)
		var (
			de *flashattn.DataError
			oe *flashattn.OptionError
			se *flashattn.ShapeError
		)
		ok := false
		switch c.expect.kind {
		case "data":
			ok = errors.As(err, &de) && de.Arg == c.expect.name
		case "option":
			ok = errors.As(err, &oe) && oe.Option == c.expect.name
		case "shape":
			ok = errors.As(err, &se) && se.Arg == c.expect.name
		}
		if !ok {
			t.Errorf("%s: %v, want a %s error for %s", c.what, err, c.expect.kind, c.expect.name)
		}
	}
	// Unused table entries beyond SeqLens are not read: -1 there is fine.
	if _, err := flashattn.ForwardKVCache(q, pk, pk, flashattn.KVCache{SeqLens: []int{3, 0}, BlockTable: [][]int{{0, -1}, {-1}}, BlockSize: 16}, nil); err != nil {
		t.Errorf("unused table entries: %v", err)
	}
	res, err := flashattn.ForwardKVCache(q, kc, kc, flashattn.KVCache{SeqLens: []int{3, 4}}, nil)
	if err != nil || res.Backend != flashattn.CPUFlash {
		t.Errorf("Auto: %v, %v", res, err)
	}
}
