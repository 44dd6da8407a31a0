package learn

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// Report is what a check found.
type Report struct {
	// OK: every one-tile check passed and every problem's result is within
	// attntest's float32 error bound of the float64 truth, as the library's is.
	OK bool
	// Hint says what is wrong, naming the line (empty when OK).
	Hint string
	// Lines describe the problems checked and their errors.
	Lines []string
}

// Verdict is the report as a notebook prints it: the problems checked, then
// "name: correct" or "name: not yet: " and the hint.
func (r *Report) Verdict(name string) string {
	var b strings.Builder
	for _, l := range r.Lines {
		b.WriteString(l + "\n")
	}
	if r.OK {
		b.WriteString(name + ": correct")
	} else {
		b.WriteString(name + ": not yet: " + r.Hint)
	}
	return b.String()
}

func fail(format string, args ...any) *Report {
	return &Report{Hint: fmt.Sprintf(format, args...)}
}

// problem is one problem of the whole-loop checks.
type problem struct {
	c attntest.Case
	t Tiles
}

func (p problem) String() string {
	c := p.c
	s := fmt.Sprintf("B=%d Nq=%d Nk=%d Hq=%d Hkv=%d d=%d Br=%d Bc=%d", c.B, c.Nq, c.Nk, c.Hq, c.Hkv, c.D, p.t.Br, p.t.Bc)
	if c.Causal {
		s += " causal"
	}
	if c.Scale != 0 {
		s += fmt.Sprintf(" tau=%g", c.Scale)
	}
	return s
}

// problems are the whole-loop checks: blocks that divide the lengths and
// ragged ones, Nq > Nk with causal rows that see no key, Nq < Nk, grouped
// query heads, one query row, and a sharp softmax whose scores overflow
// float32's exp unless the running max is subtracted.
func problems() []problem {
	mk := func(b, nq, nk, hq, hkv, d int, causal bool, scale float64, br, bc int, seed uint64) problem {
		return problem{attntest.Case{B: b, Nq: nq, Nk: nk, Hq: hq, Hkv: hkv, D: d, Causal: causal, Scale: scale, Seed: seed},
			Tiles{Br: br, Bc: bc, Causal: causal, Scale: scale}}
	}
	return []problem{
		mk(1, 64, 64, 1, 1, 16, false, 0, 16, 16, 1),
		mk(1, 100, 70, 2, 1, 32, true, 0, 32, 24, 2),
		mk(2, 45, 130, 2, 2, 8, true, 0, 16, 40, 3),
		mk(1, 1, 33, 2, 2, 16, false, 0, 8, 8, 4),
		mk(1, 33, 50, 1, 1, 16, false, 8, 8, 7, 5),
	}
}

// CheckForward checks the learner's step and finish: first on one tile at a
// time with known answers (a hint names the first wrong line), then as the
// body of Forward on every problem, against the float64 truth
// (attntest.Reference) within attntest's float32 error bound, and against
// flashattn.Forward with CPUNaive, held to the same bound.
func CheckForward(step Step, finish Finish) *Report {
	if step == nil || finish == nil {
		return fail("step or finish is nil")
	}
	if h := probeForward(step, finish); h != "" {
		return fail("%s", h)
	}
	r := &Report{}
	for _, p := range problems() {
		q, k, v, _, err := p.c.Inputs()
		if err != nil {
			return fail("%v", err)
		}
		scale := p.c.EffectiveScale()
		res, err := Forward(q, k, v, p.t, step, finish)
		if err != nil {
			return fail("on %v: %v", p, err)
		}
		truth := attntest.Reference(q, k, v, nil, p.c.Causal, scale)
		rec := &recorder{}
		if !attntest.CheckForwardBound(rec, truth, res) {
			r.Hint = fmt.Sprintf("your step and finish pass the one-tile checks, but on %v: %s", p, rec.errs[0])
			return r
		}
		naive, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.CPUNaive, Causal: p.c.Causal, Scale: p.c.Scale})
		if err != nil {
			return fail("flashattn.Forward (CPUNaive) on %v: %v", p, err)
		}
		if lib := (&recorder{}); !attntest.CheckForwardBound(lib, truth, naive) {
			return fail("CPUNaive itself is off on %v (a library bug, not yours): %s", p, lib.errs[0])
		}
		r.Lines = append(r.Lines, fmt.Sprintf("  %-55s max |O - float64| = %.1e, max |O - CPUNaive| = %.1e",
			p.String()+":", maxErr(res.Out.Data, truth.Out), maxDiff(res.Out.Data, naive.Out.Data)))
	}
	r.Lines = append([]string{"your O and L, from learn.Forward's loop with your step and finish, are within attntest's float32 error bound of the float64 truth, as CPUNaive's:"}, r.Lines...)
	r.OK = true
	return r
}

// CheckBackward checks the learner's backward step: first on one tile with
// known answers (a hint names the first wrong line), then as the body of
// Backward on every problem (with O and L from flashattn.Forward), against
// the float64 truth within attntest's float32 error bound, and against
// flashattn.Backward (CPUFlash), held to the same bound.
func CheckBackward(step BwdStep) *Report {
	if step == nil {
		return fail("step is nil")
	}
	if h := probeBackward(step); h != "" {
		return fail("%s", h)
	}
	r := &Report{}
	for _, p := range problems() {
		q, k, v, dO, err := p.c.Inputs()
		if err != nil {
			return fail("%v", err)
		}
		scale := p.c.EffectiveScale()
		opts := &flashattn.Options{Backend: flashattn.CPUFlash, Causal: p.c.Causal, Scale: p.c.Scale}
		fwd, err := flashattn.Forward(q, k, v, opts)
		if err != nil {
			return fail("flashattn.Forward on %v: %v", p, err)
		}
		g, err := Backward(q, k, v, fwd.Out, dO, fwd.LSE, p.t, step)
		if err != nil {
			return fail("on %v: %v", p, err)
		}
		truth := attntest.Reference(q, k, v, dO, p.c.Causal, scale)
		rec := &recorder{}
		if !attntest.CheckBackwardBound(rec, truth, g) {
			r.Hint = fmt.Sprintf("your step passes the one-tile checks, but on %v: %s", p, rec.errs[0])
			return r
		}
		libG, err := flashattn.Backward(q, k, v, fwd.Out, dO, fwd.LSE, opts)
		if err != nil {
			return fail("flashattn.Backward on %v: %v", p, err)
		}
		if lib := (&recorder{}); !attntest.CheckBackwardBound(lib, truth, libG) {
			return fail("flashattn.Backward itself is off on %v (a library bug, not yours): %s", p, lib.errs[0])
		}
		var e, lib float64
		for _, x := range []struct {
			got, lib *flashattn.Tensor
			truth    []float64
		}{{g.DQ, libG.DQ, truth.DQ}, {g.DK, libG.DK, truth.DK}, {g.DV, libG.DV, truth.DV}} {
			e, lib = math.Max(e, maxErr(x.got.Data, x.truth)), math.Max(lib, maxDiff(x.got.Data, x.lib.Data))
		}
		r.Lines = append(r.Lines, fmt.Sprintf("  %-55s max |dQ, dK, dV - float64| = %.1e, max |dQ, dK, dV - Backward| = %.1e", p.String()+":", e, lib))
	}
	r.Lines = append([]string{"your dQ, dK, dV, from learn.Backward's loop with your step, are within attntest's float32 error bound of the float64 truth, as flashattn.Backward's:"}, r.Lines...)
	r.OK = true
	return r
}

// recorder is a testing.TB that keeps what attntest's Check functions
// report, so that a program can use them. Only the methods below are called.
type recorder struct {
	testing.TB
	errs, logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Log(args ...any) { r.logs = append(r.logs, fmt.Sprint(args...)) }

// maxErr is max |got - want| over the entries whose truth is finite (rows
// that see no key are checked exactly by attntest).
func maxErr(got []float32, want []float64) float64 {
	var m float64
	for i, w := range want {
		if !math.IsInf(w, 0) {
			m = math.Max(m, math.Abs(float64(got[i])-w))
		}
	}
	return m
}

func maxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}
