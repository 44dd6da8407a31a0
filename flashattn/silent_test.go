package flashattn

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// Silent wrong results: inputs that could give a wrong answer with a nil
// error. Each test checks that such an input gives the right answer or a
// typed error.

func isNaN(x float32) bool { return math.IsNaN(float64(x)) }

// TestBlocksNearMaxInt: Tr = ceil(Nq/Br) must not overflow for Br near
// MaxInt (no tile would run and the call would return zeros with a nil
// error). A block at least Nq (Nk) is one block: the same bits as
// BlockQ = BlockK = Nq.
func TestBlocksNearMaxInt(t *testing.T) {
	d := Dims{B: 1, Nq: 8, Nk: 8, Hq: 2, Hkv: 1, D: 8}
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	run := func(bq, bk int) []float32 {
		o := &Options{Backend: CPUFlash, BlockQ: bq, BlockK: bk}
		res, err := Forward(q, k, v, o)
		if err != nil {
			t.Fatalf("BlockQ %d BlockK %d: %v", bq, bk, err)
		}
		g, err := Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatalf("BlockQ %d BlockK %d: backward: %v", bq, bk, err)
		}
		return slices.Concat(res.Out.Data, res.LSE, g.DQ.Data, g.DK.Data, g.DV.Data)
	}
	want := run(8, 8)
	for _, x := range want {
		if x == 0 || isNaN(x) || math.IsInf(float64(x), 0) {
			t.Fatalf("reference run has %v", x)
		}
	}
	for _, b := range [][2]int{{math.MaxInt, math.MaxInt}, {math.MaxInt - 1, 8}, {8, math.MaxInt}, {1 << 62, 3}} {
		got := run(b[0], b[1])
		if b[0] >= 8 && b[1] >= 8 && !slices.Equal(got, want) {
			t.Errorf("BlockQ %d BlockK %d: results differ from one 8x8 block", b[0], b[1])
		}
		for _, x := range got {
			if x == 0 || isNaN(x) {
				t.Fatalf("BlockQ %d BlockK %d: result has %v", b[0], b[1], x)
			}
		}
	}
}

// TestNaNInputsAgree: a NaN in q or k gives NaN in exactly the rows the NaN
// reaches, output and LSE, on both CPU backends (not LSE -Inf, which would
// make all-zero gradients), and Backward refuses a NaN LSE; with a finite
// LSE the NaN reaches the gradients.
func TestNaNInputsAgree(t *testing.T) {
	d := Dims{B: 1, Nq: 6, Nk: 6, Hq: 1, Hkv: 1, D: 8}
	k, v, dO := Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	clean := Random(d.QShape(), 1)
	q := clean.Clone()
	q.Set(0, 2, 0, 3, float32(math.NaN()))
	kn := k.Clone()
	kn.Set(0, 4, 0, 0, float32(math.NaN())) // key 4: causal rows 4 and 5 see it
	for _, c := range []struct {
		name    string
		q, k    *Tensor
		nanRows []int
	}{{"NaN in q row 2", q, k, []int{2}}, {"NaN in k row 4", clean, kn, []int{4, 5}}} {
		var first []float32
		for _, be := range []Backend{CPUNaive, CPUFlash} {
			o := &Options{Backend: be, Causal: true, BlockQ: 2, BlockK: 2}
			res, err := Forward(c.q, c.k, v, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < d.Nq; i++ {
				want := slices.Contains(c.nanRows, i)
				if isNaN(res.LSE[i]) != want || math.IsInf(float64(res.LSE[i]), 0) {
					t.Errorf("%s, %v: LSE of row %d is %v (NaN wanted: %t)", c.name, be, i, res.LSE[i], want)
				}
				for x := 0; x < d.D; x++ {
					if isNaN(res.Out.At(0, i, 0, x)) != want {
						t.Errorf("%s, %v: out(%d, %d) is %v (NaN wanted: %t)", c.name, be, i, x, res.Out.At(0, i, 0, x), want)
					}
				}
			}
			var de *DataError
			if _, err := Backward(c.q, c.k, v, res.Out, dO, res.LSE, o); !errors.As(err, &de) || de.Arg != "lse" {
				t.Errorf("%s, %v: Backward with a NaN LSE: %v, want *DataError for lse", c.name, be, err)
			}
			// The LSE of the clean inputs: the NaN still reaches the gradients.
			ok, err := Forward(clean, k, v, o)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Backward(c.q, c.k, v, ok.Out, dO, ok.LSE, o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(g.DQ.Data, isNaN) {
				t.Errorf("%s, %v: no NaN in dQ", c.name, be)
			}
			nan := 0
			for _, x := range res.LSE {
				if isNaN(x) {
					nan++
				}
			}
			if first == nil {
				first = res.LSE
			} else if nan != len(c.nanRows) {
				t.Errorf("%s: the backends disagree on NaN rows", c.name)
			}
		}
	}
}

// TestOverflowingScale: scale 3.4e38 fits float32 but scale*q.k does not.
// Rows whose scores overflow are NaN on both CPU backends (never LSE -Inf,
// which would give zero dQ), the same rows on both, and their gradients are
// refused, never zero.
func TestOverflowingScale(t *testing.T) {
	d := Dims{B: 1, Nq: 9, Nk: 7, Hq: 2, Hkv: 1, D: 8}
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	var nanRows [2][]int
	for bi, be := range []Backend{CPUNaive, CPUFlash} {
		o := &Options{Backend: be, Scale: 3.4e38}
		res, err := Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range res.LSE {
			if math.IsInf(float64(x), 0) {
				t.Errorf("%v: LSE %d is %v", be, i, x)
			}
			if isNaN(x) {
				nanRows[bi] = append(nanRows[bi], i)
			}
		}
		if len(nanRows[bi]) == 0 {
			t.Fatalf("%v: no row overflowed at scale 3.4e38 (LSE %v)", be, res.LSE)
		}
		if _, err := Backward(q, k, v, res.Out, dO, res.LSE, o); err == nil {
			t.Errorf("%v: Backward accepted the NaN LSE", be)
		}
	}
	if !slices.Equal(nanRows[0], nanRows[1]) {
		t.Errorf("NaN rows: cpu-naive %v, cpu-flash %v", nanRows[0], nanRows[1])
	}
}

// TestFP16Range: float32 values fp16 cannot hold (1e6, -7e4, Inf, NaN)
// would become Inf on the way to the GPU and give NaN rows, so the
// conversion every upload goes through refuses them, naming the argument
// and element; 65519 rounds to 65504. (gpu_test.go runs the device paths.)
func TestFP16Range(t *testing.T) {
	s := Shape{B: 2, N: 3, H: 2, D: 4}
	for _, x := range []float32{1e6, -7e4, 65520, float32(math.Inf(1)), float32(math.NaN())} {
		for _, st := range []Strides{s.ContiguousStrides(), {3, 6 * 2, 6, 24 * 2}} {
			data := make([]float32, 4*s.Numel())
			tt, err := FromStrided(s, st, data)
			if err != nil {
				t.Fatal(err)
			}
			tt.Set(1, 2, 0, 3, x)
			_, err = tensorToFP16("q", tt)
			var de *DataError
			if !errors.As(err, &de) || de.Arg != "q" || !strings.Contains(err.Error(), "(1, 2, 0, 3)") {
				t.Errorf("%v: %v, want a *DataError for q naming element (1, 2, 0, 3)", x, err)
			}
			if cerr := checkFP16("q", tt); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("%v: checkFP16 says %v, the conversion %v", x, cerr, err)
			}
		}
	}
	ok := New(s)
	ok.Set(0, 0, 0, 0, 65519)
	ok.Set(0, 0, 0, 1, -65519)
	bits, err := tensorToFP16("q", ok)
	if err != nil || FP16ToFloat32(bits[0]) != 65504 || FP16ToFloat32(bits[1]) != -65504 {
		t.Errorf("65519: %v, %v", bits[:2], err)
	}
	if maxGPUScale(64) < 1e20 || maxGPUScale(64)*64*fp16Max*fp16Max*log2e > math.MaxFloat32 {
		t.Errorf("maxGPUScale(64) = %g", maxGPUScale(64))
	}
}
