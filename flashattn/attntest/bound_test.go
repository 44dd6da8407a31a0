package attntest

import (
	"math"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestGammaBeyondUnitRoundoff: Higham's gamma_n = n u / (1 - n u) exists
// only for n u < 1 (n < 2^24 in float32); from there on it is +Inf (no
// first-order bound), never the negative or infinite-then-negative value of
// the formula, which made bounds negative and a check fail at error 0.
func TestGammaBeyondUnitRoundoff(t *testing.T) {
	prev := 0.0
	for _, n := range []int{0, 1, 64, 1 << 20, 1<<24 - 1, 1 << 24, 1<<24 + 1, 17000000, 1 << 30, math.MaxInt} {
		g := gamma(n)
		if math.IsNaN(g) || g < prev || g < 0 {
			t.Errorf("gamma(%d) = %g: want a non-negative value, at least gamma of smaller n (%g)", n, g, prev)
		}
		if inf := float64(n)*u32 >= 1; math.IsInf(g, 1) != inf {
			t.Errorf("gamma(%d) = %g: +Inf wanted exactly where n u >= 1 (%t)", n, g, inf)
		}
		prev = g
	}
}

// TestBoundsAtHugeSizes: at a head dim, a row's visible keys or a key's rows
// of 2^24 or more, every bound is non-negative (+Inf where gamma is), never
// negative or NaN, so a check never fails an element at error 0 (goflash
// demo --headdim 17000000 reported "accuracy check failed" with error 0).
// At D = 17000000 a CPUFlash forward and backward pass the checks the demo
// and the fuzz test make; at 2^24+1 keys or rows (where a CPU run adds
// nothing but time) the truth rounded to float32 does.
func TestBoundsAtHugeSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("tensors of 2^24 elements")
	}
	for _, c := range []struct {
		what string
		d    flashattn.Dims
		run  bool // run CPUFlash, else check the truth rounded to float32
	}{
		{"D = 17000000", flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: 17000000}, true},
		{"Nk = 2^24+1 keys in a row", flashattn.Dims{B: 1, Nq: 1, Nk: 1<<24 + 1, Hq: 1, Hkv: 1, D: 1}, false},
		{"Nq = 2^24+1 rows on a key", flashattn.Dims{B: 1, Nq: 1<<24 + 1, Nk: 1, Hq: 1, Hkv: 1, D: 1}, false},
	} {
		q, k, v := flashattn.Random(c.d.QShape(), 1), flashattn.Random(c.d.KVShape(), 2), flashattn.Random(c.d.KVShape(), 3)
		dO := flashattn.Random(c.d.QShape(), 4)
		if q.Data == nil || k.Data == nil || dO.Data == nil {
			t.Skipf("%s: beyond this machine's HostMemoryLimit", c.what)
		}
		scale := 1 / math.Sqrt(float64(c.d.D))
		truth := Reference(q, k, v, dO, false, scale)
		for _, b := range []struct {
			name string
			xs   []float64
		}{{"Out", truth.bOut}, {"LSE", truth.bLSE}, {"dQ", truth.bDQ}, {"dK", truth.bDK}, {"dV", truth.bDV}} {
			for i, x := range b.xs {
				if !(x >= 0) {
					t.Errorf("%s: bound of %s[%d] is %g", c.what, b.name, i, x)
					break
				}
			}
		}
		var res *flashattn.Result
		var g *flashattn.Grads
		if c.run {
			o := &flashattn.Options{Backend: flashattn.CPUFlash}
			var err error
			if res, err = flashattn.Forward(q, k, v, o); err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			if g, err = flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o); err != nil {
				t.Fatalf("%s: backward: %v", c.what, err)
			}
			// As goflash demo checks it: the 2x-baseline rule and the bounds.
			base := Baseline(FP32, q, k, v, nil, false, scale)
			if cmp := CompareForward(FP32, Reference(q, k, v, nil, false, scale), base, res); !cmp.Pass() {
				t.Errorf("%s: CompareForward: %v", c.what, cmp.Mismatches)
			}
		} else {
			f32 := func(s flashattn.Shape, xs []float64) *flashattn.Tensor {
				x := flashattn.New(s)
				for i := range xs {
					x.Data[i] = float32(xs[i])
				}
				return x
			}
			res = &flashattn.Result{Dims: c.d, Out: f32(c.d.QShape(), truth.Out), LSE: make([]float32, len(truth.LSE))}
			for i, x := range truth.LSE {
				res.LSE[i] = float32(x)
			}
			g = &flashattn.Grads{DQ: f32(c.d.QShape(), truth.DQ), DK: f32(c.d.KVShape(), truth.DK), DV: f32(c.d.KVShape(), truth.DV)}
		}
		if !CheckForwardBound(t, truth, res) {
			t.Errorf("%s: CheckForwardBound failed a float32 result", c.what)
		}
		if !CheckBackwardBound(t, truth, g) {
			t.Errorf("%s: CheckBackwardBound failed a float32 result", c.what)
		}
	}
}

// TestReferenceSplitKeepsEveryBit: the references run their (batch, kv
// head) pairs, and the forward its blocks of query rows (two here), on
// several goroutines; each pair's and row's sums keep their order, so
// the truth, its bounds and the baselines in every order match, bit for
// bit, what one goroutine computes (GQA, causal with Nq > Nk, a window,
// softcap and ALiBi, the backward too).
func TestReferenceSplitKeepsEveryBit(t *testing.T) {
	c := Case{B: 2, Nq: 37, Nk: 29, Hq: 6, Hkv: 2, D: 16, Causal: true, Softcap: 20, ALiBi: true,
		Window: &flashattn.Window{Left: 9, Right: 0}, Seed: 3}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	sc, mods := c.EffectiveScale(), ScoresOf(c.Options())
	run := func(workers int) []*Ref {
		defer func(w int) { refWorkers = w }(refWorkers)
		refWorkers = workers
		rs := []*Ref{ReferenceScores(q, k, v, dO, c.Causal, sc, mods)}
		for _, p := range []Precision{FP16, BF16} {
			rs = append(rs, BaselineScores(p, q, k, v, dO, c.Causal, sc, mods).all()...)
		}
		return rs
	}
	one, many := run(1), run(5)
	fields := func(r *Ref) [][]float64 {
		return [][]float64{r.Out, r.LSE, r.DQ, r.DK, r.DV, r.bOut, r.bLSE, r.bDQ, r.bDK, r.bDV}
	}
	for i := range one {
		for f, a := range fields(one[i]) {
			b := fields(many[i])[f]
			if len(a) != len(b) {
				t.Fatalf("ref %d field %d: %d values on one goroutine, %d on five", i, f, len(a), len(b))
			}
			for x := range a {
				if math.Float64bits(a[x]) != math.Float64bits(b[x]) {
					t.Fatalf("ref %d field %d [%d]: %v on one goroutine, %v on five", i, f, x, a[x], b[x])
				}
			}
		}
		if len(fields(one[i])[0]) == 0 || one[i].DQ == nil {
			t.Fatalf("ref %d: no output or no gradients", i)
		}
	}
}
