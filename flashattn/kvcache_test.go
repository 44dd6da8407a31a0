package flashattn_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestKVCache decodes Nq = 1 and Nq = 5 rows per sequence against caches
// of different lengths (one empty, one full), contiguous and paged (blocks
// in a shuffled order, a block table longer than needed), on both CPU
// backends, and checks every batch bit for bit against Forward on that
// batch's first SeqLens[b] keys alone, and against the float64 truth.
func TestKVCache(t *testing.T) {
	const hq, hkv, dd, ncache, bs = 4, 2, 32, 100, 16
	seqLens := []int{37, 0, 100, 16}
	batches := len(seqLens)
	kc := flashattn.Random(flashattn.Shape{B: batches, N: ncache, H: hkv, D: dd}, 2)
	vc := flashattn.Random(kc.Shape, 3)
	// The paged copy: block table rows of ceil(ncache/bs) blocks, in a shuffled pool.
	perRow := (ncache + bs - 1) / bs
	pool := rand.New(rand.NewPCG(5, 6)).Perm(batches * perRow)
	pk := flashattn.New(flashattn.Shape{B: len(pool), N: bs, H: hkv, D: dd})
	pv := flashattn.New(pk.Shape)
	table := make([][]int, batches)
	for b := range table {
		table[b] = pool[b*perRow : (b+1)*perRow]
		for n := 0; n < ncache; n++ {
			for h := 0; h < hkv; h++ {
				for x := 0; x < dd; x++ {
					pk.Set(table[b][n/bs], n%bs, h, x, kc.At(b, n, h, x))
					pv.Set(table[b][n/bs], n%bs, h, x, vc.At(b, n, h, x))
				}
			}
		}
	}
	for _, nq := range []int{1, 5} {
		q := flashattn.Random(flashattn.Shape{B: batches, N: nq, H: hq, D: dd}, uint64(nq))
		for _, o := range []flashattn.Options{
			{},
			{Causal: true},
			{Causal: true, Window: &flashattn.Window{Left: 20, Right: -1}, Softcap: 6, ALiBi: attntest.ALiBiSlopes(hq)},
		} {
			for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
				for _, paged := range []bool{false, true} {
					o := o
					o.Backend = be
					if be == flashattn.CPUFlash {
						o.BlockQ, o.BlockK = 2, 16
					}
					c, k, v := flashattn.KVCache{SeqLens: seqLens}, kc, vc
					if paged {
						c, k, v = flashattn.KVCache{SeqLens: seqLens, BlockTable: table, BlockSize: bs}, pk, pv
					}
					name := fmt.Sprintf("Nq=%d/%v/paged=%v/causal=%v,window=%v", nq, be, paged, o.Causal, o.Window != nil)
					t.Run(name, func(t *testing.T) { checkKVCache(t, q, k, v, kc, vc, c, &o) })
				}
			}
		}
	}
}

// checkKVCache runs ForwardKVCache on cache k, v (described by c) and checks
// each batch against Forward on the first SeqLens[b] rows of the
// contiguous cache kc, vc.
func checkKVCache(t *testing.T, q, k, v, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) {
	res, err := flashattn.ForwardKVCache(q, k, v, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != o.Backend {
		t.Fatalf("asked for %v, ran %v", o.Backend, res.Backend)
	}
	d := res.Dims
	for b, n := range c.SeqLens {
		qb := rowsOfBatch(q, b, 0, d.Nq)
		gotOut := rowsOfBatch(res.Out, b, 0, d.Nq)
		gotLSE := res.LSE[d.LSEIndex(b, 0, 0):][:d.Hq*d.Nq]
		if n == 0 {
			for _, x := range gotOut.Data {
				if x != 0 {
					t.Fatalf("batch %d (empty cache): output %v, want 0", b, x)
				}
			}
			for _, x := range gotLSE {
				if !math.IsInf(float64(x), -1) {
					t.Fatalf("batch %d (empty cache): LSE %v, want -Inf", b, x)
				}
			}
			continue
		}
		kb, vb := rowsOfBatch(kc, b, 0, n), rowsOfBatch(vc, b, 0, n)
		alone, err := flashattn.Forward(qb, kb, vb, o)
		if err != nil {
			t.Fatal(err)
		}
		if !bitsEqual(gotOut.Data, alone.Out.Data) || !bitsEqual(gotLSE, alone.LSE) {
			t.Errorf("batch %d (%d entries): differs from Forward on its keys alone", b, n)
		}
		scale := 1 / math.Sqrt(float64(d.D))
		mods := attntest.ScoresOf(o)
		truth := attntest.ReferenceScores(qb, kb, vb, nil, o.Causal, scale, mods)
		base := attntest.BaselineScores(attntest.FP32, qb, kb, vb, nil, o.Causal, scale, mods)
		attntest.CheckForward(t, attntest.FP32, truth, base, &flashattn.Result{Dims: alone.Dims, Out: gotOut, LSE: gotLSE})
	}
}

// rowsOfBatch copies rows [r0, r0+n) of batch b of t into a dense (1, n, H, D) tensor.
func rowsOfBatch(t *flashattn.Tensor, b, r0, n int) *flashattn.Tensor {
	s := t.Shape
	s.B, s.N = 1, n
	c := flashattn.New(s)
	for i := 0; i < n; i++ {
		for h := 0; h < s.H; h++ {
			for x := 0; x < s.D; x++ {
				c.Set(0, i, h, x, t.At(b, r0+i, h, x))
			}
		}
	}
	return c
}

// TestKVCacheErrors: a cache description that does not fit is a typed
// error, and the GPU refuses decode (Auto runs it on the CPU, saying why).
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
		{"gpu", kc, flashattn.KVCache{SeqLens: []int{3, 4}}, &flashattn.Options{Backend: flashattn.GPU}, want{"unsupported", "KV cache"}},
	} {
		_, err := flashattn.ForwardKVCache(q, c.k, c.k, c.c, c.o)
		var (
			de *flashattn.DataError
			oe *flashattn.OptionError
			se *flashattn.ShapeError
			ue *flashattn.UnsupportedError
		)
		ok := false
		switch c.expect.kind {
		case "data":
			ok = errors.As(err, &de) && de.Arg == c.expect.name
		case "option":
			ok = errors.As(err, &oe) && oe.Option == c.expect.name
		case "shape":
			ok = errors.As(err, &se) && se.Arg == c.expect.name
		case "unsupported":
			ok = errors.As(err, &ue) && ue.Feature == c.expect.name
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
