package flashattn_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// packed builds the cumulative lengths of lens.
func packed(lens []int) []int {
	cu := []int{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	return cu
}

// rowsOf copies rows [r0, r0+n) of a packed (B = 1) tensor into a dense one.
func rowsOf(t *flashattn.Tensor, r0, n int) *flashattn.Tensor {
	s := t.Shape
	s.N = n
	c := flashattn.New(s)
	for i := 0; i < n; i++ {
		for h := 0; h < s.H; h++ {
			for x := 0; x < s.D; x++ {
				c.Set(0, i, h, x, t.At(0, r0+i, h, x))
			}
		}
	}
	return c
}

// lseOf gathers the LSE of rows [r0, r0+n) of a packed (1, Hq, total) LSE.
func lseOf(lse []float32, hq, total, r0, n int) []float32 {
	var s []float32
	for h := 0; h < hq; h++ {
		s = append(s, lse[h*total+r0:][:n]...)
	}
	return s
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestVarlen packs sequences of mixed lengths (an empty one, one with
// queries and no key, one with keys and no query, Nq != Nk, GQA) and checks
// ForwardVarlen and BackwardVarlen on both CPU backends bit for bit against
// Forward and Backward on each sequence alone, and against the float64
// truth of each sequence, under each mask and score modifier.
func TestVarlen(t *testing.T) {
	lensQ := []int{5, 0, 17, 67, 1, 3, 0}
	lensK := []int{5, 3, 30, 67, 0, 1, 0}
	cuQ, cuK := packed(lensQ), packed(lensK)
	totQ, totK := cuQ[len(cuQ)-1], cuK[len(cuK)-1]
	const hq, hkv, dd = 4, 2, 32
	q := flashattn.Random(flashattn.Shape{B: 1, N: totQ, H: hq, D: dd}, 1)
	k := flashattn.Random(flashattn.Shape{B: 1, N: totK, H: hkv, D: dd}, 2)
	v := flashattn.Random(flashattn.Shape{B: 1, N: totK, H: hkv, D: dd}, 3)
	dO := flashattn.Random(q.Shape, 4)
	vl := flashattn.Varlen{CuSeqlensQ: cuQ, CuSeqlensK: cuK}
	for _, o := range []flashattn.Options{
		{},
		{Causal: true},
		{Window: &flashattn.Window{Left: 2, Right: 3}},
		{Causal: true, Window: &flashattn.Window{Left: 8, Right: -1}, Softcap: 4, ALiBi: attntest.ALiBiSlopes(hq)},
	} {
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			o := o
			o.Backend = be
			if be == flashattn.CPUFlash {
				o.BlockQ, o.BlockK = 16, 8 // several blocks per sequence, ragged ones
			}
			name := fmt.Sprintf("%v/causal=%v,window=%v,softcap=%g,alibi=%v", be, o.Causal, o.Window, o.Softcap, o.ALiBi != nil)
			t.Run(name, func(t *testing.T) { checkVarlen(t, q, k, v, dO, vl, &o) })
		}
	}
}

func checkVarlen(t *testing.T, q, k, v, dO *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) {
	res, err := flashattn.ForwardVarlen(q, k, v, vl, o)
	if err != nil {
		t.Fatal(err)
	}
	g, err := flashattn.BackwardVarlen(q, k, v, res.Out, dO, res.LSE, vl, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != o.Backend || g.Backend != o.Backend {
		t.Fatalf("asked for %v, ran %v and %v", o.Backend, res.Backend, g.Backend)
	}
	hq, totQ := q.Shape.H, q.Shape.N
	for s := 0; s < vl.Seqs(); s++ {
		r0, nq := vl.CuSeqlensQ[s], vl.CuSeqlensQ[s+1]-vl.CuSeqlensQ[s]
		k0, nk := vl.CuSeqlensK[s], vl.CuSeqlensK[s+1]-vl.CuSeqlensK[s]
		gotOut, gotLSE, gotDQ := rowsOf(res.Out, r0, nq), lseOf(res.LSE, hq, totQ, r0, nq), rowsOf(g.DQ, r0, nq)
		gotDK, gotDV := rowsOf(g.DK, k0, nk), rowsOf(g.DV, k0, nk)
		if nq == 0 || nk == 0 { // no pair of query and key: zeros, and LSE -Inf
			for _, x := range append(append(append(gotOut.Data, gotDQ.Data...), gotDK.Data...), gotDV.Data...) {
				if x != 0 {
					t.Fatalf("sequence %d (Nq %d, Nk %d): output or gradient %v, want 0", s, nq, nk, x)
				}
			}
			for _, x := range gotLSE {
				if !math.IsInf(float64(x), -1) {
					t.Fatalf("sequence %d (Nq %d, Nk 0): LSE %v, want -Inf", s, nq, x)
				}
			}
			continue
		}
		qs, ks, vs, dOs := rowsOf(q, r0, nq), rowsOf(k, k0, nk), rowsOf(v, k0, nk), rowsOf(dO, r0, nq)
		alone, err := flashattn.Forward(qs, ks, vs, o)
		if err != nil {
			t.Fatal(err)
		}
		ga, err := flashattn.Backward(qs, ks, vs, alone.Out, dOs, alone.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"Out", gotOut.Data, alone.Out.Data}, {"LSE", gotLSE, alone.LSE},
			{"dQ", gotDQ.Data, ga.DQ.Data}, {"dK", gotDK.Data, ga.DK.Data}, {"dV", gotDV.Data, ga.DV.Data}} {
			if !bitsEqual(c.got, c.want) {
				t.Errorf("sequence %d (Nq %d, Nk %d): %s differs from the sequence run alone", s, nq, nk, c.what)
			}
		}
		scale := 1 / math.Sqrt(float64(q.Shape.D))
		mods := attntest.ScoresOf(o)
		truth := attntest.ReferenceScores(qs, ks, vs, dOs, o.Causal, scale, mods)
		base := attntest.BaselineScores(attntest.FP32, qs, ks, vs, dOs, o.Causal, scale, mods)
		d := alone.Dims
		attntest.CheckForward(t, attntest.FP32, truth, base, &flashattn.Result{Dims: d, Out: gotOut, LSE: gotLSE})
		attntest.CheckBackward(t, attntest.FP32, truth, base, &flashattn.Grads{DQ: gotDQ, DK: gotDK, DV: gotDV})
	}
}

// TestVarlenErrors: bad cumulative lengths and shapes are typed errors, and
// the GPU refuses varlen (Auto runs it on the CPU, saying why).
func TestVarlenErrors(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 1, N: 6, H: 2, D: 8}, 1)
	k := flashattn.Random(flashattn.Shape{B: 1, N: 4, H: 1, D: 8}, 2)
	v := flashattn.Random(flashattn.Shape{B: 1, N: 4, H: 1, D: 8}, 3)
	good := flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 4}}
	for _, c := range []struct {
		name string
		vl   flashattn.Varlen
		arg  string
	}{
		{"one-entry", flashattn.Varlen{CuSeqlensQ: []int{6}, CuSeqlensK: []int{4}}, "cu_seqlens_q"},
		{"lengths-differ", flashattn.Varlen{CuSeqlensQ: []int{0, 6}, CuSeqlensK: []int{0, 2, 4}}, "cu_seqlens_k"},
		{"not-from-0", flashattn.Varlen{CuSeqlensQ: []int{1, 2, 6}, CuSeqlensK: []int{0, 3, 4}}, "cu_seqlens_q"},
		{"decreasing", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 2}}, "cu_seqlens_k"},
		{"short-of-N", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 5}, CuSeqlensK: []int{0, 3, 4}}, "cu_seqlens_q"},
		{"beyond-N", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 5}}, "cu_seqlens_k"},
	} {
		var de *flashattn.DataError
		if _, err := flashattn.ForwardVarlen(q, k, v, c.vl, nil); !errors.As(err, &de) || de.Arg != c.arg {
			t.Errorf("%s: %v, want *DataError for %s", c.name, err, c.arg)
		}
		if _, err := flashattn.BackwardVarlen(q, k, v, q, q, make([]float32, 12), c.vl, nil); !errors.As(err, &de) || de.Arg != c.arg {
			t.Errorf("%s backward: %v, want *DataError for %s", c.name, err, c.arg)
		}
	}
	var se *flashattn.ShapeError
	q2 := flashattn.Random(flashattn.Shape{B: 2, N: 3, H: 2, D: 8}, 1)
	k2 := flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 1, D: 8}, 1)
	if _, err := flashattn.ForwardVarlen(q2, k2, k2, flashattn.Varlen{CuSeqlensQ: []int{0, 3}, CuSeqlensK: []int{0, 2}}, nil); !errors.As(err, &se) || se.Dim != "B" {
		t.Errorf("B = 2: %v, want *ShapeError for B", err)
	}
	var oe *flashattn.OptionError
	if _, err := flashattn.ForwardVarlen(q, k, v, good, &flashattn.Options{Trace: &flashattn.Trace{}}); !errors.As(err, &oe) || oe.Option != "Trace" {
		t.Errorf("Trace: %v, want *OptionError", err)
	}
	var ue *flashattn.UnsupportedError
	if _, err := flashattn.ForwardVarlen(q, k, v, good, &flashattn.Options{Backend: flashattn.GPU}); !errors.As(err, &ue) || ue.Feature != "varlen" {
		t.Errorf("GPU: %v, want *UnsupportedError for varlen", err)
	}
	res, err := flashattn.ForwardVarlen(q, k, v, good, nil)
	if err != nil || res.Backend != flashattn.CPUFlash {
		t.Fatalf("Auto: %v, %v", res, err)
	}
	if _, err := flashattn.BackwardVarlen(q, k, v, res.Out, q, res.LSE, good, &flashattn.Options{Backend: flashattn.GPU}); !errors.As(err, &ue) || ue.Feature != "varlen" {
		t.Errorf("GPU backward: %v, want *UnsupportedError for varlen", err)
	}
	// A -Inf LSE on a row that sees keys in its own sequence is refused.
	lse := append([]float32(nil), res.LSE...)
	lse[2] = float32(math.Inf(-1)) // head 0, row 2: sequence 1's first row
	var de *flashattn.DataError
	if _, err := flashattn.BackwardVarlen(q, k, v, res.Out, q, lse, good, nil); !errors.As(err, &de) || de.Arg != "lse" {
		t.Errorf("-Inf LSE on a row with keys: %v, want *DataError for lse", err)
	}
}
