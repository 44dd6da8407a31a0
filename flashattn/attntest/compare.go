package attntest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// Comparison is what comparing one result with the truth found. The
// Compare functions fill it without a testing.T, so that programs (the
// CLI's self-test and demo) apply the same checks as the tests.
type Comparison struct {
	// Mismatches lists every failed check in words; none when the result passes.
	Mismatches []string
	// Notes are the passed checks' margins (error, baseline, bound use).
	Notes []string
	// Quantities holds the 2x-baseline rule's numbers per quantity, in the
	// order checked: Out, LSE (forward); dQ, dK, dV (backward).
	Quantities []Quantity
}

// Quantity is one output quantity under the 2x-baseline rule.
type Quantity struct {
	Name string
	// MaxErr is max |result - truth| (+Inf when the result has a NaN);
	// BaselineErr the largest error of the baseline over its summation
	// orders; the result passes when MaxErr <= 2*BaselineErr + Floor.
	MaxErr, BaselineErr, Floor float64
	Pass                       bool
}

// Pass reports whether every check passed.
func (c *Comparison) Pass() bool { return len(c.Mismatches) == 0 }

// MaxErr is the largest error over the quantities named (all when none
// are), with the baseline's error for the same quantities.
func (c *Comparison) MaxErr(names ...string) (maxErr, baselineErr float64) {
	for _, q := range c.Quantities {
		if len(names) == 0 || slices.Contains(names, q.Name) {
			maxErr, baselineErr = max(maxErr, q.MaxErr), max(baselineErr, q.BaselineErr)
		}
	}
	return maxErr, baselineErr
}

func (c *Comparison) errorf(format string, args ...any) {
	c.Mismatches = append(c.Mismatches, fmt.Sprintf(format, args...))
}

func (c *Comparison) logf(format string, args ...any) {
	c.Notes = append(c.Notes, fmt.Sprintf(format, args...))
}

// report passes c's findings to t and returns whether all checks passed.
func (c *Comparison) report(t testing.TB) bool {
	t.Helper()
	for _, n := range c.Notes {
		t.Logf("%s", n)
	}
	for _, m := range c.Mismatches {
		t.Errorf("%s", m)
	}
	return c.Pass()
}

// CompareForward compares a Forward result with the truth and the baseline
// (in all its orders) of the same problem by the 2x-baseline rule of the
// package comment, and, for FP32, with the truth's per-element float32
// error bounds.
func CompareForward(p Precision, truth, base *Ref, res *flashattn.Result) *Comparison {
	c := &Comparison{}
	compareForward(c, p, truth, base, res)
	return c
}

// CheckForward is CompareForward in a test: it reports every failure on t
// and returns whether all checks passed.
func CheckForward(t testing.TB, p Precision, truth, base *Ref, res *flashattn.Result) bool {
	t.Helper()
	return CompareForward(p, truth, base, res).report(t)
}

// CheckForwardBound checks a float32 Forward result for arbitrary inputs:
// the same structural checks as CheckForward, and every element within the
// truth's first-order float32 error bound (bound.go), which unlike the
// 2x-baseline rule cannot fail a correct backend by bad luck.
func CheckForwardBound(t testing.TB, truth *Ref, res *flashattn.Result) bool {
	t.Helper()
	c := &Comparison{}
	compareForwardBound(c, truth, res)
	return c.report(t)
}

// CompareBackward compares the gradients of a Backward call, made with the
// backend's own forward output and LSE, with the truth and the baselines
// (all computed with a dOut), and for FP32 with the truth's float32 error
// bounds.
func CompareBackward(p Precision, truth, base *Ref, g *flashattn.Grads) *Comparison {
	c := &Comparison{}
	compareBackward(c, p, truth, base, g)
	return c
}

// CheckBackward is CompareBackward in a test.
func CheckBackward(t testing.TB, p Precision, truth, base *Ref, g *flashattn.Grads) bool {
	t.Helper()
	return CompareBackward(p, truth, base, g).report(t)
}

// CheckBackwardBound is CheckForwardBound for gradients.
func CheckBackwardBound(t testing.TB, truth *Ref, g *flashattn.Grads) bool {
	t.Helper()
	c := &Comparison{}
	compareBackwardBound(c, truth, g)
	return c.report(t)
}

// compareForward is CompareForward into c.
func compareForward(c *Comparison, p Precision, truth, base *Ref, res *flashattn.Result) bool {
	out, lse, ok := checkForwardShape(c, truth, res)
	if out == nil {
		return false
	}
	d := truth.Dims
	bases := base.all()
	u32 := FP32.unitRoundoff()
	lseAt := func(r int) string { return fmt.Sprintf("[b=%d h=%d i=%d]", r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq) }
	ok = compare(c, "Out", out, truth.Out, field(bases, func(r *Ref) []float64 { return r.Out }), bshd(d.QShape()), 4*p.unitRoundoff()*truth.outMax) && ok
	// The LSE is float32 in every backend, whatever its inputs' precision.
	ok = compare(c, "LSE", lse, truth.LSE, field(bases, func(r *Ref) []float64 { return r.LSE }), lseAt, 4*u32*truth.lseMax) && ok
	if p == FP32 {
		ok = withinBound(c, "Out", out, truth.Out, truth.bOut, bshd(d.QShape())) && ok
		ok = withinBound(c, "LSE", lse, truth.LSE, truth.bLSE, lseAt) && ok
	}
	return ok
}

// compareForwardBound is CheckForwardBound into c.
func compareForwardBound(c *Comparison, truth *Ref, res *flashattn.Result) bool {
	out, lse, ok := checkForwardShape(c, truth, res)
	if out == nil {
		return false
	}
	d := truth.Dims
	lseAt := func(r int) string { return fmt.Sprintf("[b=%d h=%d i=%d]", r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq) }
	ok = withinBound(c, "Out", out, truth.Out, truth.bOut, bshd(d.QShape())) && ok
	return withinBound(c, "LSE", lse, truth.LSE, truth.bLSE, lseAt) && ok
}

// checkForwardShape checks shapes, that every element was written and is
// finite, and the exact values of rows that see no key. It returns the
// output (dense) and the LSE with those rows zeroed (nil if unusable).
func checkForwardShape(c *Comparison, truth *Ref, res *flashattn.Result) (out, lse []float32, ok bool) {
	d := truth.Dims
	switch {
	case res == nil || res.Out == nil:
		c.errorf("Forward returned no result")
		return nil, nil, false
	case res.Out.Shape != d.QShape():
		c.errorf("Out has shape %v, want %v", res.Out.Shape, d.QShape())
		return nil, nil, false
	case len(res.LSE) != d.LSELen():
		c.errorf("LSE has %d elements, want %d", len(res.LSE), d.LSELen())
		return nil, nil, false
	}
	out = denseOf(res.Out)
	ok = allFinite(c, "Out", out, d.QShape())
	// Rows that see no key: output exactly 0, LSE exactly -Inf, never NaN.
	bad := 0
	for r, masked := range truth.Masked {
		b, h, i := r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq
		lse := res.LSE[r]
		switch {
		case masked && !math.IsInf(float64(lse), -1):
			bad++
			if bad == 1 {
				c.errorf("LSE[b=%d h=%d i=%d] = %v (%s) for a row that sees no key, want -Inf", b, h, i, lse, describe(lse))
			}
		case masked:
			for x := 0; x < d.D; x++ {
				if o := out[((b*d.Nq+i)*d.Hq+h)*d.D+x]; o != 0 {
					bad++
					if bad == 1 {
						c.errorf("Out[b=%d i=%d h=%d x=%d] = %v for a row that sees no key, want 0", b, i, h, x, o)
					}
				}
			}
		case math.IsNaN(float64(lse)) || math.IsInf(float64(lse), 0):
			bad++
			if bad == 1 {
				c.errorf("LSE[b=%d h=%d i=%d] = %v (%s), want finite", b, h, i, lse, describe(lse))
			}
		}
	}
	if bad > 1 {
		c.errorf("... %d bad LSE rows or masked-row outputs in all", bad)
	}
	lse = make([]float32, len(res.LSE))
	for r, x := range res.LSE {
		if !truth.Masked[r] { // masked rows were checked exactly above
			lse[r] = x
		}
	}
	return out, lse, bad == 0 && ok
}

// compareBackward is CompareBackward into c.
func compareBackward(c *Comparison, p Precision, truth, base *Ref, g *flashattn.Grads) bool {
	bases := base.all()
	if slices.ContainsFunc(bases, func(r *Ref) bool { return r.DQ == nil }) {
		c.errorf("CheckBackward: baselines computed without dOut")
		return false
	}
	dq, dk, dv, ok := checkBackwardShape(c, truth, g)
	if dq == nil {
		return false
	}
	d := truth.Dims
	u := p.unitRoundoff()
	// A gradient whose truth is 0 everywhere (each row sees one key: P = 1,
	// so dS = P (dP - Di) = 0) has a floor of 0 by the rule, and what a
	// backend returns is float32 sums' rounding alone (of dP and Di, which
	// tensor cores sum in pieces of their own): it is held to the largest
	// element of its float32 bound (bound.go) instead.
	floor := func(i int, bound []float64) float64 {
		if truth.gradMax[i] == 0 {
			return maxAbs(bound)
		}
		return 4 * u * truth.gradMax[i]
	}
	ok = compare(c, "dQ", dq, truth.DQ, field(bases, func(r *Ref) []float64 { return r.DQ }), bshd(d.QShape()), floor(0, truth.bDQ)) && ok
	ok = compare(c, "dK", dk, truth.DK, field(bases, func(r *Ref) []float64 { return r.DK }), bshd(d.KVShape()), floor(1, truth.bDK)) && ok
	ok = compare(c, "dV", dv, truth.DV, field(bases, func(r *Ref) []float64 { return r.DV }), bshd(d.KVShape()), floor(2, truth.bDV)) && ok
	if p == FP32 {
		ok = gradsWithinBound(c, truth, dq, dk, dv) && ok
	}
	return ok
}

// compareBackwardBound is CheckBackwardBound into c.
func compareBackwardBound(c *Comparison, truth *Ref, g *flashattn.Grads) bool {
	dq, dk, dv, ok := checkBackwardShape(c, truth, g)
	if dq == nil {
		return false
	}
	return gradsWithinBound(c, truth, dq, dk, dv) && ok
}

func gradsWithinBound(c *Comparison, truth *Ref, dq, dk, dv []float32) bool {
	d := truth.Dims
	ok := withinBound(c, "dQ", dq, truth.DQ, truth.bDQ, bshd(d.QShape()))
	ok = withinBound(c, "dK", dk, truth.DK, truth.bDK, bshd(d.KVShape())) && ok
	return withinBound(c, "dV", dv, truth.DV, truth.bDV, bshd(d.KVShape())) && ok
}

// checkBackwardShape checks shapes, finiteness and the exact zero dQ of rows
// that see no key, and returns the gradients dense (nil if unusable).
func checkBackwardShape(c *Comparison, truth *Ref, g *flashattn.Grads) (dq, dk, dv []float32, ok bool) {
	d := truth.Dims
	if truth.DQ == nil {
		c.errorf("CheckBackward: truth computed without dOut")
		return nil, nil, nil, false
	}
	if g == nil || g.DQ == nil || g.DK == nil || g.DV == nil {
		c.errorf("Backward returned no gradients")
		return nil, nil, nil, false
	}
	for _, x := range []struct {
		name      string
		got, want flashattn.Shape
	}{{"dQ", g.DQ.Shape, d.QShape()}, {"dK", g.DK.Shape, d.KVShape()}, {"dV", g.DV.Shape, d.KVShape()}} {
		if x.got != x.want {
			c.errorf("%s has shape %v, want %v", x.name, x.got, x.want)
			return nil, nil, nil, false
		}
	}
	dq, dk, dv = denseOf(g.DQ), denseOf(g.DK), denseOf(g.DV)
	ok = allFinite(c, "dQ", dq, d.QShape())
	ok = allFinite(c, "dK", dk, d.KVShape()) && ok
	ok = allFinite(c, "dV", dv, d.KVShape()) && ok
	for r, masked := range truth.Masked {
		b, h, i := r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq
		for x := 0; masked && x < d.D; x++ {
			if g := dq[((b*d.Nq+i)*d.Hq+h)*d.D+x]; g != 0 {
				c.errorf("dQ[b=%d i=%d h=%d x=%d] = %v for a row that sees no key, want 0", b, i, h, x, g)
				ok = false
				break
			}
		}
	}
	return dq, dk, dv, ok
}

// withinBound checks every element against its float32 error bound.
func withinBound(c *Comparison, name string, got []float32, truth, bound []float64, at func(int) string) bool {
	n, worst := 0, 0.0
	for i, w := range truth {
		if math.IsInf(w, -1) {
			continue
		}
		e := math.Abs(float64(got[i]) - w)
		if !(e <= bound[i]) {
			if n == 0 {
				c.errorf("%s%s = %v, want %.8g within its float32 error bound %.3g (off by %.3g)", name, at(i), got[i], w, bound[i], e)
			}
			n++
		} else if bound[i] > 0 {
			worst = math.Max(worst, e/bound[i])
		}
	}
	if n > 1 {
		c.errorf("... %d elements of %s beyond their bound in all", n, name)
	}
	if n == 0 {
		c.logf("%-3s within float32 bounds (largest err/bound %.2f)", name, worst)
	}
	return n == 0
}

func field(rs []*Ref, f func(*Ref) []float64) [][]float64 {
	var xs [][]float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return xs
}

// compare applies the tolerance rule to one quantity; bases holds the
// quantity in every baseline order.
func compare(c *Comparison, name string, got []float32, truth []float64, bases [][]float64, at func(int) string, floor float64) bool {
	eg, worst := 0.0, 0
	eb := 0.0
	for i, w := range truth {
		if math.IsInf(w, -1) {
			continue // an LSE row that sees no key: checked exactly by the caller
		}
		e := math.Abs(float64(got[i]) - w)
		if !(e <= eg) { // NaN counts as the largest error
			eg, worst = e, i
			if math.IsNaN(e) {
				break
			}
		}
		for _, base := range bases {
			eb = math.Max(eb, math.Abs(base[i]-w))
		}
	}
	lim := 2*eb + floor
	q := Quantity{Name: name, MaxErr: eg, BaselineErr: eb, Floor: floor, Pass: eg <= lim}
	if math.IsNaN(eg) {
		q.MaxErr = math.Inf(1)
	}
	c.Quantities = append(c.Quantities, q)
	if !q.Pass {
		c.errorf("%s: max |err| %.3g at %s (got %v, want %.7g) > 2 x baseline %.3g + floor %.3g",
			name, eg, at(worst), got[worst], truth[worst], eb, floor)
		return false
	}
	ratio := 0.0
	if eb > 0 {
		ratio = eg / eb
	}
	c.logf("%-3s max |err| %.2e, baseline %.2e (ratio %.2f), floor %.1e", name, eg, eb, ratio, floor)
	return true
}

// allFinite reports the first non-finite elements of got (dense in shape s),
// naming unwritten (poisoned) ones as such.
func allFinite(c *Comparison, name string, got []float32, s flashattn.Shape) bool {
	n := 0
	for i, x := range got {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			if n < 3 {
				c.errorf("%s%s = %v (%s), want finite", name, bshd(s)(i), x, describe(x))
			}
			n++
		}
	}
	if n > 3 {
		c.errorf("... %d non-finite elements of %s in all", n, name)
	}
	return n == 0
}

func describe(x float32) string {
	switch {
	case IsPoison(x):
		return "poison: never written"
	case math.IsNaN(float64(x)):
		return "NaN"
	case math.IsInf(float64(x), 0):
		return "Inf"
	}
	return "finite"
}

// bshd names element i of a dense tensor of shape s.
func bshd(s flashattn.Shape) func(i int) string {
	return func(i int) string {
		return fmt.Sprintf("[b=%d n=%d h=%d x=%d]", i/(s.N*s.H*s.D), i/(s.H*s.D)%s.N, i/s.D%s.H, i%s.D)
	}
}

// denseOf reads t (any strides) in dense BSHD order.
func denseOf(t *flashattn.Tensor) []float32 {
	s := t.Shape
	out := make([]float32, 0, s.Numel())
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				for x := 0; x < s.D; x++ {
					out = append(out, t.At(b, n, h, x))
				}
			}
		}
	}
	return out
}
