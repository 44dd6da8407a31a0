package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// Accuracy is a forward result checked against attntest's float64 truth by
// the FA2 tolerance rule (error <= 2x the error of a textbook baseline in
// the backend's precision, plus a rounding floor).
type Accuracy struct {
	Precision string  `json:"precision"` // fp32 (CPU) or fp16 (GPU)
	MaxErrOut float64 `json:"max_err_out"`
	MaxErrLSE float64 `json:"max_err_lse"`
	// BaselineErrOut is the error of the baseline in the same precision:
	// what a correct backend is allowed about twice of.
	BaselineErrOut float64  `json:"baseline_err_out"`
	Pass           bool     `json:"pass"`
	Failures       []string `json:"failures,omitempty"`
}

// checkForward compares res with attntest's float64 Reference and
// Baseline of the same problem.
func checkForward(p attntest.Precision, q, k, v *flashattn.Tensor, causal bool, res *flashattn.Result) Accuracy {
	scale := 1 / math.Sqrt(float64(q.Shape.D))
	truth := attntest.Reference(q, k, v, nil, causal, scale)
	base := attntest.Baseline(p, q, k, v, nil, causal, scale)
	acc := Accuracy{Precision: p.String()}
	tb := &checkTB{}
	acc.Pass = tb.run(func() bool { return attntest.CheckForward(tb, p, truth, base, res) })
	acc.Failures = tb.errs
	acc.MaxErrOut, acc.BaselineErrOut = maxAbsErr(res.Out.Data, truth.Out), maxAbsErr32(base.Out, truth.Out)
	acc.MaxErrLSE = maxAbsErr(res.LSE, truth.LSE)
	return acc
}

// maxAbsErr is max |got - want| over the finite wants (-Inf marks an LSE
// row that sees no key, checked exactly by attntest). NaN counts as +Inf.
func maxAbsErr(got []float32, want []float64) float64 {
	m := 0.0
	for i, w := range want {
		if math.IsInf(w, 0) {
			continue
		}
		e := math.Abs(float64(got[i]) - w)
		if math.IsNaN(e) {
			return math.Inf(1)
		}
		m = max(m, e)
	}
	return m
}

func maxAbsErr32(got, want []float64) float64 {
	m := 0.0
	for i, w := range want {
		if !math.IsInf(w, 0) {
			m = max(m, math.Abs(got[i]-w))
		}
	}
	return m
}

// checkTB lets a program use attntest's checkers, which report through a
// testing.TB: it records the failures instead of failing a test. Only the
// methods the checkers call are implemented; run turns any other call (a
// nil embedded interface) into a failure instead of a crash.
type checkTB struct {
	testing.TB
	errs []string
}

func (c *checkTB) Helper()                   {}
func (c *checkTB) Name() string              { return "goflash" }
func (c *checkTB) Logf(string, ...any)       {}
func (c *checkTB) Log(...any)                {}
func (c *checkTB) Errorf(f string, a ...any) { c.errs = append(c.errs, fmt.Sprintf(f, a...)) }
func (c *checkTB) Error(a ...any) {
	c.errs = append(c.errs, strings.TrimSuffix(fmt.Sprintln(a...), "\n"))
}
func (c *checkTB) Failed() bool { return len(c.errs) > 0 }

func (c *checkTB) run(check func() bool) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.errs = append(c.errs, fmt.Sprintf("attntest check stopped: %v", r))
			ok = false
		}
	}()
	return check() && !c.Failed()
}
