package flashattn_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// The fuzz targets of the sibling entry points, ForwardVarlen and
// ForwardKVCacheAppend, as FuzzForward is Forward's: random valid
// problems (sizes, GQA, masks, windows, softcap, ALiBi, scales up to
// sharp softmaxes, tiles, workers) on both CPU backends, each sequence
// held against the float64 truth of that sequence alone by attntest's
// float32 error bounds (CheckForwardBound, CheckBackwardBound), whose
// checks also demand every element written and rows that see no key
// exactly 0 with LSE -Inf. Their domain is valid, finite inputs with no
// aliasing: refusals are FuzzForward's business.

// fuzzMods builds the options the fuzz arguments describe: the mask, the
// window (wl, wr: -1 open, else folded to [0, 40)), softcap (cap > 0
// folded into (0, 20]), ALiBi slopes, a scale folded into [0, 16) (0: the
// default), tiles and workers.
func fuzzMods(hq int, causal bool, window bool, wl, wr int8, softcap float64, alibi bool, scale float64, bq, bk, workers uint8) *flashattn.Options {
	o := &flashattn.Options{Causal: causal, BlockQ: int(bq % 80), BlockK: int(bk % 80), Workers: int(workers % 5)}
	if !math.IsNaN(scale) && !math.IsInf(scale, 0) {
		o.Scale = math.Abs(math.Mod(scale, 16))
	}
	if window {
		side := func(x int8) int {
			if x < 0 {
				return -1
			}
			return int(x) % 40
		}
		o.Window = &flashattn.Window{Left: side(wl), Right: side(wr)}
		if causal && o.Window.Right > 0 {
			o.Window.Right = 0
		}
	}
	if c := math.Abs(softcap); !math.IsNaN(c) && !math.IsInf(c, 0) && c > 0 {
		o.Softcap = math.Mod(c, 20) + 0.25
	}
	if alibi {
		o.ALiBi = attntest.ALiBiSlopes(hq)
	}
	return o
}

// effScale is the scale o runs with at head dim d.
func effScale(o *flashattn.Options, d int) float64 {
	if o.Scale == 0 {
		return 1 / math.Sqrt(float64(d))
	}
	return o.Scale
}

// fuzzCPUBackends are the backends the fuzz targets hold to the truth.
var fuzzCPUBackends = []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash}

// fuzzHeads folds the head counts and head dim: Hq a multiple of Hkv.
func fuzzHeads(hkv, groups, dd uint8) (hq, kv, d int) {
	kv = 1 + int(hkv%3)
	return kv * (1 + int(groups%3)), kv, 1 + int(dd%33)
}

// fuzzLens reads sequence lengths from raw: one per byte, folded to [0, 40).
func fuzzLens(raw []byte, most int) []int {
	var lens []int
	for _, b := range raw[:min(len(raw), most)] {
		lens = append(lens, int(b%40))
	}
	return lens
}

// checkNoKey checks a sequence whose rows see no key: output 0, LSE -Inf.
func checkNoKey(t *testing.T, what string, out *flashattn.Tensor, lse []float32) {
	t.Helper()
	for _, x := range lse {
		if !math.IsInf(float64(x), -1) {
			t.Fatalf("%s: LSE %v for a row that sees no key, want -Inf", what, x)
		}
	}
	for _, x := range out.Data {
		if x != 0 {
			t.Fatalf("%s: output %v for a row that sees no key, want 0", what, x)
		}
	}
}

// seqLSE gathers rows [r0, r0+n) of every head of a (1, Hq, total) LSE.
func seqLSE(lse []float32, hq, total, r0, n int) []float32 {
	var out []float32
	for h := 0; h < hq; h++ {
		out = append(out, lse[h*total+r0:][:n]...)
	}
	return out
}

// FuzzForwardVarlen runs ForwardVarlen and BackwardVarlen on packed
// sequences of random lengths (empty ones, queries without keys and keys
// without queries included) on both CPU backends, every sequence checked
// against its own float64 truth.
func FuzzForwardVarlen(f *testing.F) {
	f.Add(uint64(1), []byte{5, 17}, []byte{5, 30}, uint8(1), uint8(1), uint8(15), false, false, int8(0), int8(0), 0.0, false, 0.0, uint8(0), uint8(0), uint8(0))
	f.Add(uint64(2), []byte{0, 17, 3, 39}, []byte{3, 9, 0, 39}, uint8(2), uint8(2), uint8(31), true, false, int8(0), int8(0), 0.0, false, 0.0, uint8(16), uint8(8), uint8(2))
	f.Add(uint64(3), []byte{12, 1, 25}, []byte{30, 1, 4}, uint8(1), uint8(0), uint8(7), false, true, int8(3), int8(2), 4.0, true, 0.0, uint8(5), uint8(7), uint8(1))
	f.Add(uint64(4), []byte{20, 20}, []byte{6, 20}, uint8(0), uint8(2), uint8(23), true, true, int8(-1), int8(0), 0.0, true, 11.0, uint8(0), uint8(0), uint8(3))
	f.Add(uint64(5), []byte{1}, []byte{1}, uint8(0), uint8(0), uint8(0), false, false, int8(0), int8(0), 0.0, false, 15.9, uint8(1), uint8(1), uint8(0))
	f.Add(uint64(6), []byte{39, 0, 0, 38}, []byte{1, 39, 0, 2}, uint8(2), uint8(1), uint8(32), true, true, int8(5), int8(-1), 25.0, true, 3.0, uint8(79), uint8(3), uint8(4))
	f.Fuzz(func(t *testing.T, seed uint64, rawQ, rawK []byte, hkv8, groups, dd uint8, causal, window bool, wl, wr int8, softcap float64, alibi bool, scale float64, bq, bk, workers uint8) {
		n := min(len(rawQ), len(rawK), 6)
		if n == 0 {
			return // a varlen call needs a sequence
		}
		lq, lk := fuzzLens(rawQ, n), fuzzLens(rawK, n)
		hq, hkv, d := fuzzHeads(hkv8, groups, dd)
		vl := flashattn.Varlen{CuSeqlensQ: attntest.Cu(lq), CuSeqlensK: attntest.Cu(lk)}
		tq, tk := vl.CuSeqlensQ[n], vl.CuSeqlensK[n]
		if tq == 0 || tk == 0 {
			return // a packed tensor needs a row
		}
		qs, kvs := flashattn.Shape{B: 1, N: tq, H: hq, D: d}, flashattn.Shape{B: 1, N: tk, H: hkv, D: d}
		q, k, v, dO := flashattn.Random(qs, seed), flashattn.Random(kvs, seed+1), flashattn.Random(kvs, seed+2), flashattn.Random(qs, seed+3)
		base := fuzzMods(hq, causal, window, wl, wr, softcap, alibi, scale, bq, bk, workers)
		sc := effScale(base, d)
		// The truth of every sequence alone (nil for one without queries or keys).
		truths := make([]*attntest.Ref, n)
		for s := range n {
			if lq[s] > 0 && lk[s] > 0 {
				truths[s] = attntest.ReferenceScores(attntest.Rows(q, 0, vl.CuSeqlensQ[s], lq[s]), attntest.Rows(k, 0, vl.CuSeqlensK[s], lk[s]),
					attntest.Rows(v, 0, vl.CuSeqlensK[s], lk[s]), attntest.Rows(dO, 0, vl.CuSeqlensQ[s], lq[s]), base.Causal, sc, attntest.ScoresOf(base))
			}
		}
		for _, be := range fuzzCPUBackends {
			o := *base
			o.Backend = be
			res, err := flashattn.ForwardVarlen(q, k, v, vl, &o)
			if err != nil {
				t.Fatalf("%v: ForwardVarlen of lengths %v/%v, Hq %d Hkv %d D %d, options %+v: %v", be, lq, lk, hq, hkv, d, o, err)
			}
			g, err := flashattn.BackwardVarlen(q, k, v, res.Out, dO, res.LSE, vl, &o)
			if err != nil {
				t.Fatalf("%v: BackwardVarlen of lengths %v/%v: %v", be, lq, lk, err)
			}
			for s := range n {
				r0, k0 := vl.CuSeqlensQ[s], vl.CuSeqlensK[s]
				if lq[s] == 0 {
					if lk[s] > 0 {
						checkNoKey(t, "dK/dV of a sequence without queries", attntest.Rows(g.DK, 0, k0, lk[s]), nil)
						checkNoKey(t, "dV of a sequence without queries", attntest.Rows(g.DV, 0, k0, lk[s]), nil)
					}
					continue
				}
				got := &flashattn.Result{Out: attntest.Rows(res.Out, 0, r0, lq[s]), LSE: seqLSE(res.LSE, hq, tq, r0, lq[s])}
				if truths[s] == nil {
					checkNoKey(t, "a sequence without keys", got.Out, got.LSE)
					checkNoKey(t, "dQ of a sequence without keys", attntest.Rows(g.DQ, 0, r0, lq[s]), nil)
					continue
				}
				got.Dims = truths[s].Dims
				if !attntest.CheckForwardBound(t, truths[s], got) {
					t.Fatalf("%v: sequence %d of lengths %v/%v (Hq %d Hkv %d D %d, options %+v) is wrong", be, s, lq, lk, hq, hkv, d, o)
				}
				gs := &flashattn.Grads{DQ: attntest.Rows(g.DQ, 0, r0, lq[s]), DK: attntest.Rows(g.DK, 0, k0, lk[s]), DV: attntest.Rows(g.DV, 0, k0, lk[s])}
				if !attntest.CheckBackwardBound(t, truths[s], gs) {
					t.Fatalf("%v: gradients of sequence %d of lengths %v/%v (Hq %d Hkv %d D %d, options %+v) are wrong", be, s, lq, lk, hq, hkv, d, o)
				}
			}
		}
	})
}

// FuzzForwardKVCacheAppend appends random new entries to random caches,
// contiguous or paged (each sequence its own blocks, in a shuffled pool),
// on both CPU backends: the cache must then hold the new entries at each
// sequence's length and every other entry unchanged, SeqLens must be left
// as they were, and every sequence's result must be the float64 truth over
// its grown keys (bottom-right aligned masks).
func FuzzForwardKVCacheAppend(f *testing.F) {
	f.Add(uint64(1), []byte{5, 0, 30}, uint8(1), uint8(1), uint8(1), uint8(1), uint8(15), false, uint8(0), uint8(3), false, false, int8(0), int8(0), 0.0, false, 0.0, uint8(0), uint8(0), uint8(0))
	f.Add(uint64(2), []byte{16, 31}, uint8(4), uint8(4), uint8(2), uint8(2), uint8(31), true, uint8(1), uint8(0), true, false, int8(0), int8(0), 0.0, false, 0.0, uint8(8), uint8(16), uint8(2))
	f.Add(uint64(3), []byte{0}, uint8(2), uint8(5), uint8(0), uint8(0), uint8(7), false, uint8(0), uint8(9), true, true, int8(4), int8(0), 6.0, true, 0.0, uint8(0), uint8(0), uint8(1))
	f.Add(uint64(4), []byte{39, 1, 17, 8}, uint8(5), uint8(2), uint8(1), uint8(2), uint8(23), true, uint8(2), uint8(1), false, true, int8(-1), int8(3), 0.0, true, 12.0, uint8(3), uint8(5), uint8(3))
	f.Add(uint64(5), []byte{32}, uint8(0), uint8(0), uint8(2), uint8(1), uint8(32), true, uint8(0), uint8(0), true, true, int8(1), int8(-1), 30.0, false, 15.0, uint8(1), uint8(1), uint8(4))
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte, nq8, nnew8, hkv8, groups, dd uint8, paged bool, page8, spare8 uint8, causal, window bool, wl, wr int8, softcap float64, alibi bool, scale float64, bq, bk, workers uint8) {
		lens := fuzzLens(raw, 5)
		if len(lens) == 0 {
			return
		}
		b, nq, nNew := len(lens), 1+int(nq8%6), 1+int(nnew8%6)
		hq, hkv, d := fuzzHeads(hkv8, groups, dd)
		ncache := slices.Max(lens) + nNew + int(spare8%8) // room for the append
		qs := flashattn.Shape{B: b, N: nq, H: hq, D: d}
		news := flashattn.Shape{B: b, N: nNew, H: hkv, D: d}
		q, kNew, vNew := flashattn.Random(qs, seed), flashattn.Random(news, seed+1), flashattn.Random(news, seed+2)
		kc := flashattn.Random(flashattn.Shape{B: b, N: ncache, H: hkv, D: d}, seed+3)
		vc := flashattn.Random(kc.Shape, seed+4)
		// want: the contiguous cache with the new entries at each length.
		want := [2]*flashattn.Tensor{kc.Clone(), vc.Clone()}
		for bi, n := range lens {
			for i := range nNew {
				for h := range hkv {
					for x := range d {
						want[0].Set(bi, n+i, h, x, kNew.At(bi, i, h, x))
						want[1].Set(bi, n+i, h, x, vNew.At(bi, i, h, x))
					}
				}
			}
		}
		base := fuzzMods(hq, causal, window, wl, wr, softcap, alibi, scale, bq, bk, workers)
		sc := effScale(base, d)
		truths := make([]*attntest.Ref, b)
		for bi, n := range lens {
			truths[bi] = attntest.ReferenceScores(attntest.Rows(q, bi, 0, nq), attntest.Rows(want[0], bi, 0, n+nNew), attntest.Rows(want[1], bi, 0, n+nNew),
				nil, base.Causal, sc, attntest.ScoresOf(base))
		}
		page := flashattn.PageMultiple * (1 + int(page8%3))
		for _, be := range fuzzCPUBackends {
			// A fresh cache per backend: the call writes it.
			k, v := kc.Clone(), vc.Clone()
			cache := flashattn.KVCache{SeqLens: slices.Clone(lens)}
			at := func(bi, n int) (blk, row int) { return bi, n }
			if paged {
				perRow := (ncache+page-1)/page + int(spare8%2)
				pool := rand.New(rand.NewPCG(seed, 7)).Perm(b * perRow)
				k = flashattn.New(flashattn.Shape{B: b * perRow, N: page, H: hkv, D: d})
				v = flashattn.New(k.Shape)
				k.Fill(7) // blocks no sequence uses, and entries past each cache
				v.Fill(7)
				cache.BlockSize, cache.BlockTable = page, make([][]int, b)
				for bi := range b {
					cache.BlockTable[bi] = pool[bi*perRow : (bi+1)*perRow]
				}
				at = func(bi, n int) (blk, row int) { return cache.BlockTable[bi][n/page], n % page }
				for bi := range b {
					for n := range ncache {
						blk, row := at(bi, n)
						for h := range hkv {
							for x := range d {
								k.Set(blk, row, h, x, kc.At(bi, n, h, x))
								v.Set(blk, row, h, x, vc.At(bi, n, h, x))
							}
						}
					}
				}
			}
			o := *base
			o.Backend = be
			res, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, k, v, cache, &o)
			if err != nil {
				t.Fatalf("%v: ForwardKVCacheAppend of lengths %v + %d (Nq %d, Hq %d Hkv %d D %d, page %d/%t, options %+v): %v", be, lens, nNew, nq, hq, hkv, d, page, paged, o, err)
			}
			if !slices.Equal(cache.SeqLens, lens) {
				t.Fatalf("%v: the call changed SeqLens to %v (were %v)", be, cache.SeqLens, lens)
			}
			for ti, got := range [2]*flashattn.Tensor{k, v} {
				for bi := range b {
					for n := range ncache {
						blk, row := at(bi, n)
						for h := range hkv {
							for x := range d {
								if g, w := got.At(blk, row, h, x), want[ti].At(bi, n, h, x); g != w {
									t.Fatalf("%v: %s cache of batch %d, entry %d (length %d + %d new), head %d, col %d: %v, want %v",
										be, [2]string{"k", "v"}[ti], bi, n, lens[bi], nNew, h, x, g, w)
								}
							}
						}
					}
				}
			}
			for bi := range b {
				got := &flashattn.Result{Dims: truths[bi].Dims, Out: attntest.Rows(res.Out, bi, 0, nq), LSE: res.LSE[res.Dims.LSEIndex(bi, 0, 0):][:hq*nq]}
				if !attntest.CheckForwardBound(t, truths[bi], got) {
					t.Fatalf("%v: batch %d of lengths %v + %d (Nq %d, Hq %d Hkv %d D %d, paged %t, options %+v) is wrong", be, bi, lens, nNew, nq, hq, hkv, d, paged, o)
				}
			}
		}
	})
}
