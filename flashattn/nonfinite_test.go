package flashattn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

var (
	nan  = float32(math.NaN())
	pInf = float32(math.Inf(1))
	nInf = float32(math.Inf(-1))
)

// one builds a (1, n, 1, 1) tensor from xs.
func one(xs ...float32) *flashattn.Tensor {
	t, err := flashattn.FromSlice(flashattn.Shape{B: 1, N: len(xs), H: 1, D: 1}, xs)
	if err != nil {
		panic(err)
	}
	return t
}

// TestNonFiniteReached: on both CPU backends a NaN or Inf that a row reaches
// (its q row, or the k or v row of a key the mask lets it see) makes the
// row NaN, output and LSE, as float64 and PyTorch make it, even where the
// key's softmax weight rounds to 0 in float32 or a softcap bounds the
// score; a key the causal mask or a window hides is not reached.
func TestNonFiniteReached(t *testing.T) {
	for _, c := range []struct {
		what    string
		q, k, v *flashattn.Tensor
		o       flashattn.Options
	}{
		// exp(-200) is 0 in float32: the NaN's weight rounds to 0.
		{"NaN in v, weight 0 in float32", one(1), one(0, -200), one(1, nan), flashattn.Options{Scale: 1}},
		{"+Inf in v, weight 0 in float32", one(1), one(0, -200), one(1, pInf), flashattn.Options{Scale: 1}},
		{"-Inf in v, weight 0 in float32", one(1), one(0, -200), one(1, nInf), flashattn.Options{Scale: 1}},
		{"+Inf in q, softcap 2", one(pInf), one(1, 0.5), one(1, 2), flashattn.Options{Scale: 1, Softcap: 2}},
		{"-Inf in q, softcap 2", one(nInf), one(1, 0.5), one(1, 2), flashattn.Options{Scale: 1, Softcap: 2}},
		{"+Inf in k, softcap 2", one(1), one(pInf, 0.5), one(1, 2), flashattn.Options{Scale: 1, Softcap: 2}},
		{"-Inf in k", one(1), one(0, nInf), one(1, 2), flashattn.Options{Scale: 1}},
		{"NaN in v, ALiBi weight 0", one(1), one(0, 0), one(nan, 1), flashattn.Options{Scale: 1, ALiBi: []float64{200}}},
	} {
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			o := c.o
			o.Backend = be
			res, err := flashattn.Forward(c.q, c.k, c.v, &o)
			if err != nil {
				t.Fatalf("%s, %v: %v", c.what, be, err)
			}
			if !isNaN32(res.Out.Data[0]) || !isNaN32(res.LSE[0]) {
				t.Errorf("%s, %v: out %v, LSE %v; want NaN, NaN", c.what, be, res.Out.Data[0], res.LSE[0])
			}
		}
	}
}

func isNaN32(x float32) bool { return math.IsNaN(float64(x)) }

// TestNonFiniteRows: in larger problems (batches, GQA, causal, windows,
// strided views) exactly the rows that reach a non-finite element are NaN,
// output and LSE; the others are bit-equal to the same call with the
// element finite (or to no-key rows' 0 and -Inf), on both CPU backends,
// and the KV-cache and varlen entry points follow the same rule: an element
// past a sequence's length or in another sequence is not reached.
func TestNonFiniteRows(t *testing.T) {
	d := flashattn.Dims{B: 2, Nq: 7, Nk: 9, Hq: 4, Hkv: 2, D: 5}
	type at struct{ b, n, h, x int }
	for _, c := range []struct {
		what   string
		arg    int // 0 q, 1 k, 2 v
		where  at
		val    float32
		causal bool
		window *flashattn.Window
	}{
		{"NaN in v of key 3, causal", 2, at{1, 3, 1, 2}, nan, true, nil},
		{"+Inf in k of key 8 (the last), causal", 1, at{0, 8, 0, 4}, pInf, true, nil},
		{"-Inf in v of key 0, window [1, 0]", 2, at{1, 0, 0, 0}, nInf, false, &flashattn.Window{Left: 1, Right: 0}},
		{"NaN in q row 1, causal with Nq > Nk", 0, at{0, 1, 3, 2}, nan, true, nil},
		{"+Inf in q row 6", 0, at{1, 6, 0, 0}, pInf, false, nil},
	} {
		dd := d
		if c.arg == 0 && c.causal {
			dd.Nq, dd.Nk = 9, 7 // rows 0 and 1 see no key
		}
		clean := []*flashattn.Tensor{flashattn.Random(dd.QShape(), 1), flashattn.Random(dd.KVShape(), 2), flashattn.Random(dd.KVShape(), 3)}
		// v as a strided view (every other element of a larger buffer).
		vs := dd.KVShape()
		st := vs.ContiguousStrides()
		for i := range st {
			st[i] *= 2
		}
		vView, err := flashattn.FromStrided(vs, st, make([]float32, 2*vs.Numel()))
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < vs.B; b++ {
			for n := 0; n < vs.N; n++ {
				for h := 0; h < vs.H; h++ {
					for x := 0; x < vs.D; x++ {
						vView.Set(b, n, h, x, clean[2].At(b, n, h, x))
					}
				}
			}
		}
		clean[2] = vView
		bad := []*flashattn.Tensor{clean[0].Clone(), clean[1].Clone(), clean[2].Clone()}
		w := c.where
		bad[c.arg].Set(w.b, w.n, w.h, w.x, c.val)
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			o := &flashattn.Options{Backend: be, Causal: c.causal, Window: c.window, BlockQ: 2, BlockK: 3}
			want, err := flashattn.Forward(clean[0], clean[1], clean[2], o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := flashattn.Forward(bad[0], bad[1], bad[2], o)
			if err != nil {
				t.Fatal(err)
			}
			off := dd.Nk - dd.Nq
			sees := func(i, j int) bool {
				lo, hi := 0, dd.Nk-1
				if c.causal {
					hi = i + off
				}
				if c.window != nil {
					if c.window.Left >= 0 {
						lo = i + off - c.window.Left
					}
					if c.window.Right >= 0 {
						hi = min(hi, i+off+c.window.Right)
					}
				}
				return j >= max(lo, 0) && j <= min(hi, dd.Nk-1)
			}
			for b := 0; b < dd.B; b++ {
				for h := 0; h < dd.Hq; h++ {
					for i := 0; i < dd.Nq; i++ {
						any := false
						for j := 0; j < dd.Nk; j++ {
							any = any || sees(i, j)
						}
						reached := any && b == w.b && (c.arg == 0 && h == w.h && i == w.n ||
							c.arg > 0 && h/dd.Groups() == w.h && sees(i, w.n))
						row := dd.LSEIndex(b, h, i)
						what := fmt.Sprintf("%s, %v: row (b %d, h %d, i %d)", c.what, be, b, h, i)
						if reached {
							if !isNaN32(got.LSE[row]) {
								t.Errorf("%s reaches the %v: LSE %v, want NaN", what, c.val, got.LSE[row])
							}
							for x := 0; x < dd.D; x++ {
								if !isNaN32(got.Out.At(b, i, h, x)) {
									t.Errorf("%s reaches the %v: out[%d] %v, want NaN", what, c.val, x, got.Out.At(b, i, h, x))
									break
								}
							}
							continue
						}
						if math.Float32bits(got.LSE[row]) != math.Float32bits(want.LSE[row]) {
							t.Errorf("%s does not reach the %v: LSE %v, want %v", what, c.val, got.LSE[row], want.LSE[row])
						}
						for x := 0; x < dd.D; x++ {
							if math.Float32bits(got.Out.At(b, i, h, x)) != math.Float32bits(want.Out.At(b, i, h, x)) {
								t.Errorf("%s does not reach the %v: out[%d] %v, want %v", what, c.val, x, got.Out.At(b, i, h, x), want.Out.At(b, i, h, x))
								break
							}
						}
					}
				}
			}
		}
	}
}

// TestNonFiniteKVCacheAndVarlen: a cache entry past a sequence's length and
// a key of another packed sequence are not reached; a cache entry in use
// whose weight rounds to 0 is.
func TestNonFiniteKVCacheAndVarlen(t *testing.T) {
	for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		o := &flashattn.Options{Backend: be, Scale: 1}
		// Cache of 2 sequences x 4 entries, D = 1: batch 0 uses 2 entries,
		// batch 1 three. k = 0 except batch 1 entry 2 (-200: weight 0).
		q := one(1, 1)
		q.Shape.B, q.Shape.N = 2, 1
		q.Strides = q.Shape.ContiguousStrides()
		kc, _ := flashattn.FromSlice(flashattn.Shape{B: 2, N: 4, H: 1, D: 1}, []float32{0, 0, 0, 0, 0, 0, -200, 0})
		vc, _ := flashattn.FromSlice(kc.Shape, []float32{1, 2, nan, pInf, 1, 2, nan, 3})
		res, err := flashattn.ForwardKVCache(q, kc, vc, flashattn.KVCache{SeqLens: []int{2, 3}}, o)
		if err != nil {
			t.Fatal(err)
		}
		if isNaN32(res.Out.Data[0]) || res.Out.Data[0] != 1.5 || !isNaN32(res.Out.Data[1]) || !isNaN32(res.LSE[1]) {
			t.Errorf("%v: KV cache out %v LSE %v: want batch 0 1.5 (its NaN and Inf lie past its length), batch 1 NaN", be, res.Out.Data, res.LSE)
		}
		// Two packed sequences of 2 tokens; the second's v has a NaN.
		qv, _ := flashattn.FromSlice(flashattn.Shape{B: 1, N: 4, H: 1, D: 1}, []float32{1, 1, 1, 1})
		kv, _ := flashattn.FromSlice(qv.Shape, []float32{0, 0, 0, -200})
		vv, _ := flashattn.FromSlice(qv.Shape, []float32{1, 2, 3, nan})
		vl := flashattn.Varlen{CuSeqlensQ: []int{0, 2, 4}, CuSeqlensK: []int{0, 2, 4}}
		r2, err := flashattn.ForwardVarlen(qv, kv, vv, vl, o)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Out.Data[0] != 1.5 || r2.Out.Data[1] != 1.5 || !isNaN32(r2.Out.Data[2]) || !isNaN32(r2.Out.Data[3]) {
			t.Errorf("%v: varlen out %v: want 1.5 1.5 NaN NaN", be, r2.Out.Data)
		}
		// A cache large enough for the scan to run on several goroutines:
		// a NaN in v at an entry whose score is -800 (weight 0) in batch 1.
		big := flashattn.Shape{B: 2, N: 4096, H: 2, D: 64}
		qb := flashattn.New(flashattn.Shape{B: 2, N: 1, H: 4, D: 64})
		qb.Fill(1)
		kb, vb := flashattn.Random(big, 1), flashattn.Random(big, 2)
		for x := 0; x < big.D; x++ {
			kb.Set(1, 3000, 1, x, -100)
		}
		vb.Set(1, 3000, 1, 7, nan)
		rb, err := flashattn.ForwardKVCache(qb, kb, vb, flashattn.KVCache{SeqLens: []int{4096, 4096}}, &flashattn.Options{Backend: be, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		for h := 0; h < 4; h++ {
			for b := 0; b < 2; b++ {
				want := b == 1 && h >= 2 // the query heads of kv head 1
				if isNaN32(rb.LSE[b*4+h]) != want || isNaN32(rb.Out.At(b, 0, h, 0)) != want {
					t.Errorf("%v: large cache, batch %d head %d: LSE %v out %v (NaN wanted: %t)", be, b, h, rb.LSE[b*4+h], rb.Out.At(b, 0, h, 0), want)
				}
			}
		}
	}
}
