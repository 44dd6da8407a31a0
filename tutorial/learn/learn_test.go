package learn_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/tutorial/learn"
)

// The reference answers, as the notebooks' solution cells hold them
// (notebooks/04_tiling_forward.ipynb, notebooks/05_backward.ipynb).

func step(S, V [][]float32, m, l []float32, O [][]float32) {
	for r := range S {
		mNew := m[r]
		for _, s := range S[r] {
			mNew = max(mNew, s)
		}
		if math.IsInf(float64(mNew), -1) {
			continue // the row has seen no key yet: exp(-Inf - (-Inf)) would be NaN
		}
		alpha := learn.Exp(m[r] - mNew) // 0 on the row's first block: nothing to rescale
		l[r] *= alpha
		for x := range O[r] {
			O[r][x] *= alpha
		}
		for c, s := range S[r] {
			P := learn.Exp(s - mNew) // a masked score, -Inf, gives 0
			l[r] += P
			for x := range O[r] {
				O[r][x] += P * V[c][x]
			}
		}
		m[r] = mNew
	}
}

func finish(m, l []float32, O [][]float32, L []float32) {
	for r := range O {
		if l[r] > 0 {
			for x := range O[r] {
				O[r][x] /= l[r]
			}
		}
		L[r] = m[r] + learn.Log(l[r])
	}
}

func bwdStep(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32) {
	for r := range P {
		for c := range P[r] {
			dS := P[r][c] * (dP[r][c] - D[r])
			for x := range dO[r] {
				dV[c][x] += P[r][c] * dO[r][x]
				dK[c][x] += tau * dS * Q[r][x]
				dQ[r][x] += tau * dS * K[c][x]
			}
		}
	}
}

// The blank stubs, as the notebooks' exercise cells hold them: comments only.

func blankStep(S, V [][]float32, m, l []float32, O [][]float32) {}
func blankFinish(m, l []float32, O [][]float32, L []float32)    {}
func blankBwdStep(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32) {
}

func TestReferenceAnswersPass(t *testing.T) {
	r := learn.CheckForward(step, finish)
	if !r.OK {
		t.Fatalf("forward reference answer fails: %s", r.Hint)
	}
	v := r.Verdict("exercise 1")
	if !strings.HasSuffix(v, "\nexercise 1: correct") || len(r.Lines) != 6 {
		t.Errorf("verdict:\n%s", v)
	}
	t.Log("\n" + v)
	r = learn.CheckBackward(bwdStep)
	if !r.OK {
		t.Fatalf("backward reference answer fails: %s", r.Hint)
	}
	t.Log("\n" + r.Verdict("exercise 2"))
}

func TestBlankStubsGiveHints(t *testing.T) {
	for _, c := range []struct {
		name string
		r    *learn.Report
		want string
	}{
		{"forward", learn.CheckForward(blankStep, blankFinish), "row 0's m is -Inf after its first key block, whose largest score in that row is 2: compute mNew = max(m[r], rowmax(S[r]))"},
		{"backward", learn.CheckBackward(blankBwdStep), "dV is 0: did you add P^T dO to it?"},
		{"nil", learn.CheckForward(nil, nil), "nil"},
	} {
		v := c.r.Verdict("exercise")
		if c.r.OK || !strings.Contains(c.r.Hint, c.want) || strings.Contains(v, "correct") || !strings.HasPrefix(v, "exercise: not yet: ") {
			t.Errorf("%s: OK %v, verdict %q, want a hint with %q and no \"correct\"", c.name, c.r.OK, v, c.want)
		}
	}
}

// Each usual slip gets the hint that names its line.
func TestForwardSlipsAreNamed(t *testing.T) {
	type stepFn = func(S, V [][]float32, m, l []float32, O [][]float32)
	// slip builds a step from the reference with one line changed.
	slip := func(noMaxOld, noGuard, noRescale, invRescale, overwrite, noSub, noL, noO, noStoreM, normalise bool) stepFn {
		return func(S, V [][]float32, m, l []float32, O [][]float32) {
			for r := range S {
				mNew := m[r]
				if noMaxOld {
					mNew = float32(math.Inf(-1))
				}
				for _, s := range S[r] {
					mNew = max(mNew, s)
				}
				if !noGuard && math.IsInf(float64(mNew), -1) {
					continue
				}
				alpha := learn.Exp(m[r] - mNew)
				switch {
				case noRescale:
					alpha = 1
				case invRescale:
					alpha = learn.Exp(mNew - m[r])
				case overwrite:
					alpha = 0
				}
				l[r] *= alpha
				for x := range O[r] {
					O[r][x] *= alpha
				}
				for c, s := range S[r] {
					P := learn.Exp(s - mNew)
					if noSub {
						P = learn.Exp(s)
					}
					if !noL {
						l[r] += P
					}
					if !noO {
						for x := range O[r] {
							O[r][x] += P * V[c][x]
						}
					}
				}
				if normalise {
					for x := range O[r] {
						O[r][x] /= l[r]
					}
				}
				if !noStoreM {
					m[r] = mNew
				}
			}
		}
	}
	badFinish := func(noDivide, noGuard, logOnly bool) func(m, l []float32, O [][]float32, L []float32) {
		return func(m, l []float32, O [][]float32, L []float32) {
			for r := range O {
				if !noDivide && (noGuard || l[r] > 0) {
					for x := range O[r] {
						O[r][x] /= l[r]
					}
				}
				L[r] = m[r] + learn.Log(l[r])
				if logOnly {
					L[r] = learn.Log(l[r])
				}
			}
		}
	}
	for _, c := range []struct {
		name   string
		step   stepFn
		finish func(m, l []float32, O [][]float32, L []float32)
		want   string
	}{
		{"max without the old m", slip(true, false, false, false, false, false, false, false, false, false), finish, "row 1's m is 0, the largest score of this block, but its running max was already 0.25"},
		{"no guard", slip(false, true, false, false, false, false, false, false, false, false), finish, "row 3 sees no key yet"},
		{"no rescale", slip(false, false, true, false, false, false, false, false, false, false), finish, "row 0's l was not rescaled: its max grows from 2 to 4"},
		{"inverted rescale", slip(false, false, false, true, false, false, false, false, false, false), finish, "row 0's l is NaN after its first key block"},
		{"overwrite", slip(false, false, false, false, true, false, false, false, false, false), finish, "row 0's l lost the earlier key blocks"},
		{"no max subtracted", slip(false, false, false, false, false, true, false, false, false, false), finish, "row 0's l is 11.76, a sum of exp(S[r][c]): P is exp(S[r][c] - mNew)"},
		{"no rowsum", slip(false, false, false, false, false, false, true, false, false, false), finish, "row 0's l is 0: did you add rowsum(P) to l?"},
		{"no P V", slip(false, false, false, false, false, false, false, true, false, false), finish, "row 0's O is 0: did you add P V to O?"},
		{"m not stored", slip(false, false, false, false, false, false, false, false, true, false), finish, "row 0's m is -Inf after its first key block"},
		{"normalised in the loop", slip(false, false, false, false, false, false, false, false, false, true), finish, "row 0's O is already divided by l"},
		{"no division", step, badFinish(true, false, false), "row 0's output is not divided by its l"},
		{"0/0", step, badFinish(false, true, false), "row 2 saw no key: its l is 0 and O/l = 0/0 is NaN"},
		{"L = log l", step, badFinish(false, false, true), "row 0's L is log(l) = 0.5596"},
		{"blank finish", step, blankFinish, "row 0's output is not divided by its l"},
		{"panic", func(S, V [][]float32, m, l []float32, O [][]float32) { _ = S[len(S)] }, finish, "your step panicked: runtime error: index out of range"},
	} {
		r := learn.CheckForward(c.step, c.finish)
		if r.OK || !strings.Contains(r.Hint, c.want) || strings.Contains(r.Verdict("x"), "correct") {
			t.Errorf("%s: OK %v, hint %q, want one with %q", c.name, r.OK, r.Hint, c.want)
		}
	}
}

func TestBackwardSlipsAreNamed(t *testing.T) {
	type fn = func(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32)
	slip := func(dS func(P, dP, D float32) float32, noTau, overwrite, noQ bool) fn {
		return func(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32) {
			if noTau {
				tau = 1
			}
			if overwrite {
				for _, m := range [][][]float32{dQ, dK, dV} {
					for _, row := range m {
						clear(row)
					}
				}
			}
			for r := range P {
				for c := range P[r] {
					ds := dS(P[r][c], dP[r][c], D[r])
					for x := range dO[r] {
						dV[c][x] += P[r][c] * dO[r][x]
						dK[c][x] += tau * ds * Q[r][x]
						if !noQ {
							dQ[r][x] += tau * ds * K[c][x]
						}
					}
				}
			}
		}
	}
	ok := func(P, dP, D float32) float32 { return P * (dP - D) }
	for _, c := range []struct {
		name string
		step fn
		want string
	}{
		{"no tau", slip(ok, true, false, false), "dK misses the scale tau"},
		{"no D", slip(func(P, dP, D float32) float32 { return P * dP }, false, false, false), "dK is off because dS misses D"},
		{"no P", slip(func(P, dP, D float32) float32 { return dP - D }, false, false, false), "dK is off because dS misses the factor P"},
		{"sign", slip(func(P, dP, D float32) float32 { return P * (D - dP) }, false, false, false), "dK has the wrong sign"},
		{"overwrite", slip(ok, false, true, false), "dV was overwritten, not added to"},
		{"no dQ", slip(ok, false, false, true), "dQ is 0: did you add to it?"},
		{"panic", func(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32) {
			dK[len(P)][0] = 1
		}, "your step panicked"},
	} {
		r := learn.CheckBackward(c.step)
		if r.OK || !strings.Contains(r.Hint, c.want) || strings.Contains(r.Verdict("x"), "correct") {
			t.Errorf("%s: OK %v, hint %q, want one with %q", c.name, r.OK, r.Hint, c.want)
		}
	}
}

// The scaffolds with the reference answers are FlashAttention: on shapes
// beyond the check's own (blocks larger than the problem, one key, tiles of
// one row), within attntest's float32 error bound, as the library is.
func TestScaffoldsAreFlashAttention(t *testing.T) {
	for _, c := range []struct {
		c      attntest.Case
		br, bc int
	}{
		{attntest.Case{B: 1, Nq: 17, Nk: 17, Hq: 1, Hkv: 1, D: 8, Causal: true, Seed: 1}, 64, 64},
		{attntest.Case{B: 2, Nq: 97, Nk: 17, Hq: 4, Hkv: 2, D: 16, Causal: true, Seed: 2}, 10, 3},
		{attntest.Case{B: 1, Nq: 17, Nk: 97, Hq: 2, Hkv: 1, D: 32, Causal: true, Seed: 3}, 1, 13},
		{attntest.Case{B: 1, Nq: 5, Nk: 1, Hq: 1, Hkv: 1, D: 4, Seed: 4}, 2, 1},
		{attntest.Case{B: 1, Nq: 40, Nk: 40, Hq: 1, Hkv: 1, D: 16, Scale: 10, Seed: 5}, 16, 16},
	} {
		t.Run(fmt.Sprintf("Nq%d-Nk%d-Br%d-Bc%d", c.c.Nq, c.c.Nk, c.br, c.bc), func(t *testing.T) {
			q, k, v, dO, err := c.c.Inputs()
			if err != nil {
				t.Fatal(err)
			}
			tiles := learn.Tiles{Br: c.br, Bc: c.bc, Causal: c.c.Causal, Scale: c.c.Scale}
			truth := attntest.Reference(q, k, v, dO, c.c.Causal, c.c.EffectiveScale())
			res, err := learn.Forward(q, k, v, tiles, step, finish)
			if err != nil {
				t.Fatal(err)
			}
			attntest.CheckForwardBound(t, truth, res)
			g, err := learn.Backward(q, k, v, res.Out, dO, res.LSE, tiles, bwdStep)
			if err != nil {
				t.Fatal(err)
			}
			attntest.CheckBackwardBound(t, truth, g)
			naive, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.CPUNaive, Causal: c.c.Causal, Scale: c.c.Scale})
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range naive.Out.Data {
				if d := math.Abs(float64(x - res.Out.Data[i])); d > 1e-5 {
					t.Fatalf("Out[%d]: learn %v, CPUNaive %v", i, res.Out.Data[i], x)
				}
			}
		})
	}
}

// Bad tiles and a step that breaks a row's length are errors, not panics.
func TestScaffoldErrors(t *testing.T) {
	c := attntest.Case{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 4, Seed: 1}
	q, k, v, dO, _ := c.Inputs()
	if _, err := learn.Forward(q, k, v, learn.Tiles{Br: 0, Bc: 4}, step, finish); err == nil {
		t.Error("Br = 0 accepted")
	}
	for _, s := range []float64{math.NaN(), math.Inf(1), -1} {
		if _, err := learn.Forward(q, k, v, learn.Tiles{Br: 4, Bc: 4, Scale: s}, step, finish); err == nil {
			t.Errorf("scale %v accepted", s)
		}
	}
	// Tiles near MaxInt are one tile, not zero (⌈n/b⌉ without n + b - 1).
	want, _ := learn.Forward(q, k, v, learn.Tiles{Br: 8, Bc: 8}, step, finish)
	for _, tl := range []learn.Tiles{{Br: math.MaxInt, Bc: 4}, {Br: 4, Bc: math.MaxInt}} {
		got, err := learn.Forward(q, k, v, tl, step, finish)
		if err != nil || got.Out.At(0, 0, 0, 0) != want.Out.At(0, 0, 0, 0) || got.LSE[0] != want.LSE[0] {
			t.Errorf("tiles %+v: %v", tl, err)
		}
	}
	short := func(S, V [][]float32, m, l []float32, O [][]float32) { O[0] = O[0][:1] }
	if _, err := learn.Forward(q, k, v, learn.Tiles{Br: 4, Bc: 4}, short, finish); err == nil || !strings.Contains(err.Error(), "row 0 of O has 1 numbers") {
		t.Errorf("a shortened row of O: %v", err)
	}
	res, _ := learn.Forward(q, k, v, learn.Tiles{Br: 4, Bc: 4}, step, finish)
	if _, err := learn.Backward(q, k, v, res.Out, dO, res.LSE[:3], learn.Tiles{Br: 4, Bc: 4}, bwdStep); err == nil {
		t.Error("a short LSE accepted")
	}
	hollow := &flashattn.Tensor{Shape: dO.Shape, Strides: dO.Shape.ContiguousStrides(), Data: dO.Data[:3]}
	if _, err := learn.Backward(q, k, v, res.Out, hollow, res.LSE, learn.Tiles{Br: 4, Bc: 4}, bwdStep); err == nil || !strings.Contains(err.Error(), "dO") {
		t.Errorf("a dO whose Data is short: %v", err)
	}
	boom := func(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32) {
		panic("boom")
	}
	if _, err := learn.Backward(q, k, v, res.Out, dO, res.LSE, learn.Tiles{Br: 4, Bc: 4}, boom); err == nil || !strings.Contains(err.Error(), "panicked: boom") {
		t.Errorf("a panicking step: %v", err)
	}
}
