package main

import (
	"math"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// Accuracy is a forward result checked against attntest's float64 truth by
// the FA2 tolerance rule (error <= 2x the error of a textbook baseline in
// the backend's precision, plus a rounding floor).
type Accuracy struct {
	Precision string `json:"precision"` // fp32 (CPU) or fp16 (GPU)
	MaxErrOut errNum `json:"max_err_out"`
	MaxErrLSE errNum `json:"max_err_lse"`
	// BaselineErrOut is the error of the baseline in the same precision
	// (the largest over its summation orders, as the rule takes it): what a
	// correct backend is allowed about twice of.
	BaselineErrOut errNum   `json:"baseline_err_out"`
	Pass           bool     `json:"pass"`
	Failures       []string `json:"failures,omitempty"`
}

// checkForward compares res with attntest's float64 Reference and
// Baseline of the same problem.
func checkForward(p attntest.Precision, q, k, v *flashattn.Tensor, causal bool, res *flashattn.Result) Accuracy {
	scale := 1 / math.Sqrt(float64(q.Shape.D))
	truth := attntest.Reference(q, k, v, nil, causal, scale)
	base := attntest.Baseline(p, q, k, v, nil, causal, scale)
	c := attntest.CompareForward(p, truth, base, res)
	acc := Accuracy{Precision: p.String(), Pass: c.Pass(), Failures: c.Mismatches}
	out, base0 := c.MaxErr("Out")
	lse, _ := c.MaxErr("LSE")
	acc.MaxErrOut, acc.BaselineErrOut, acc.MaxErrLSE = errNum(out), errNum(base0), errNum(lse)
	return acc
}
