// Package attntest is the conformance suite every flashattn backend runs
// (CPU naive, CPU flash, GPU), in the style of gonum's testblas: one
// exported Run that a backend's own test calls with a Backend value.
//
// Truth is a float64 textbook computation written here, independent of the
// backends (Reference). Tolerances follow the FlashAttention-2 tests: a
// baseline is the same textbook computation in the backend's precision
// (Baseline: float32 arithmetic for FP32; fp16-rounded inputs, P, dS and
// outputs with float32 accumulation for FP16), and a backend passes when
//
//	maxErr(backend, truth) <= 2 * maxErr(baseline, truth) + floor
//
// for the output, the LSE and each of dQ, dK, dV.
//
// The textbook fixes no summation order, and one order alone can be lucky:
// where P is near 1, dS = P (dP - D) cancels dP = dO.v against D = dO.O, and
// a baseline that sums both in the same order sees their rounding cancel too
// (with Nk = 1 it gets dQ = dK = 0 exactly), which a correct backend
// summing them apart (FA2 computes D in a kernel of its own) does not. So
// the baseline error is the largest over three orders: sequential, reversed,
// and pairwise (a GPU's tree reduction), D always sequential. The floor is 4
// unit roundoffs (2 ulps) of the precision times the largest |truth| of the
// quantity: the last rounding of an output, which a baseline may happen not
// to pay (for N = 1 it is exact; the LSE is float32 in every backend). A
// real bug (a missed rescale, a wrong mask, an unwritten element, a wrong
// GQA head) is orders of magnitude larger.
//
// The rule is statistical. On small or sharply peaked problems the largest
// error is decided by a handful of roundings and a correct backend can land
// well beyond 2x (over 30000 random problems with N <= 69 and D <= 40, 0.25%
// of correct CPU results did, needing up to 11x). The suite's cases are
// large enough for it (CPU backends stay below 1.3x). FP32 results are
// also held, element by element, to a deterministic first-order float32
// error bound computed with the truth (bound.go): CheckForwardBound and
// CheckBackwardBound apply only that, for arbitrary inputs such as the fuzz
// test's, where it cannot fail a correct backend by bad luck.
//
// Beyond accuracy the suite checks that every output element was written and
// is finite, that rows which see no key (causal with Nq > Nk) give output 0,
// LSE -Inf and dQ 0 exactly, that inputs are left untouched, that bad inputs
// return the library's typed errors, and that results are bit-reproducible
// with Options.Deterministic.
package attntest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// Precision is the arithmetic a backend is held to.
type Precision int

const (
	// FP32: float32 inputs, arithmetic and outputs (the CPU backends).
	FP32 Precision = iota
	// FP16: fp16 inputs, P and outputs, float32 accumulation (the GPU kernels).
	FP16
)

func (p Precision) String() string {
	if p == FP16 {
		return "fp16"
	}
	return "fp32"
}

func (p Precision) round(x float32) float32 {
	if p == FP16 {
		return RoundHalf(x)
	}
	return x
}

// unitRoundoff is half the distance from 1 to the next representable number.
func (p Precision) unitRoundoff() float64 {
	if p == FP16 {
		return 0x1p-11
	}
	return 0x1p-24
}

// Backend is what the suite needs from one implementation.
type Backend struct {
	Name     string
	Forward  func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error)
	Backward func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) // nil: forward only
	// Precision the backend is held to.
	Precision Precision
	// HeadDims lists the supported head dims (nil: all). For any other D,
	// Forward and Backward must return a *flashattn.UnsupportedError.
	HeadDims []int
	// MaxN, when > 0, skips cases with Nq or Nk above it (for slow backends).
	MaxN int
}

func (b Backend) supports(d int) bool { return b.HeadDims == nil || slices.Contains(b.HeadDims, d) }

// ForBackend runs a library backend through the public API
// (flashattn.Forward and Backward with Options.Backend = be), and fails a
// call whose Result says another backend ran. GPU is held to FP16, the CPU
// backends to FP32; set HeadDims and MaxN on the result as needed.
func ForBackend(be flashattn.Backend) Backend {
	with := func(o *flashattn.Options) *flashattn.Options {
		var c flashattn.Options
		if o != nil {
			c = *o
		}
		c.Backend = be
		return &c
	}
	p := FP32
	if be == flashattn.GPU {
		p = FP16
	}
	return Backend{
		Name: be.String(),
		Forward: func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
			res, err := flashattn.Forward(q, k, v, with(o))
			if err == nil && res.Backend != be {
				return nil, fmt.Errorf("attntest: asked for backend %v, %v ran (%s)", be, res.Backend, res.Reason)
			}
			return res, err
		},
		Backward: func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
			g, err := flashattn.Backward(q, k, v, out, dOut, lse, with(o))
			if err == nil && g.Backend != be {
				return nil, fmt.Errorf("attntest: asked for backend %v, %v ran (%s)", be, g.Backend, g.Reason)
			}
			return g, err
		},
		Precision: p,
	}
}

// Run runs the whole suite against b: the error cases, every case of
// Cases() forward and backward, and the determinism check.
func Run(t *testing.T, b Backend) {
	t.Run("errors", func(t *testing.T) { RunErrors(t, b) })
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) { RunCase(t, b, c) })
	}
	t.Run("deterministic", func(t *testing.T) { runDeterministic(t, b) })
}

// RunCase runs one case against b, forward and (when b has one) backward.
func RunCase(t *testing.T, b Backend, c Case) {
	t.Helper()
	if b.MaxN > 0 && max(c.Nq, c.Nk) > b.MaxN {
		t.Skipf("%s: N above the backend's cap %d", c, b.MaxN)
	}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(q, k, v, dO)
	o := c.Options()
	if !b.supports(c.D) {
		_, err := b.Forward(q, k, v, o)
		expectUnsupported(t, "Forward", c, err)
		if b.Backward != nil {
			d := c.Dims()
			_, err := b.Backward(q, k, v, flashattn.New(d.QShape()), dO, make([]float32, d.LSELen()), o)
			expectUnsupported(t, "Backward", c, err)
		}
		return
	}
	res, err := b.Forward(q, k, v, o)
	if err != nil {
		t.Fatalf("%s: Forward(%v): %v", b.Name, c, err)
	}
	truth, base := refs(c, b.Precision, q, k, v, dO)
	CheckForward(t, b.Precision, truth, base, res)
	if b.Backward == nil {
		t.Logf("%s has no Backward: forward checked only", b.Name)
	} else {
		g, err := b.Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatalf("%s: Backward(%v): %v", b.Name, c, err)
		}
		CheckBackward(t, b.Precision, truth, base, g)
	}
	if after := snapshot(q, k, v, dO); !slices.Equal(before, after) {
		t.Errorf("%s: the backend modified its inputs", b.Name)
	}
}

func expectUnsupported(t *testing.T, call string, c Case, err error) {
	t.Helper()
	var ue *flashattn.UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("%s(%v) with an unsupported head dim: got error %v, want *flashattn.UnsupportedError", call, c, err)
	}
}

// snapshot copies the bits of the tensors' data (NaN padding included).
func snapshot(ts ...*flashattn.Tensor) []uint32 {
	var s []uint32
	for _, t := range ts {
		for _, x := range t.Data {
			s = append(s, math.Float32bits(x))
		}
	}
	return s
}

// refs returns the truth and the baseline of a case, cached: every backend
// of a test binary runs the same cases.
func refs(c Case, p Precision, q, k, v, dO *flashattn.Tensor) (truth, base *Ref) {
	refMu.Lock()
	defer refMu.Unlock()
	truthKey := refKey{c, -1}
	if truth = refCache[truthKey]; truth == nil {
		truth = Reference(q, k, v, dO, c.Causal, c.EffectiveScale())
		refCache[truthKey] = truth
	}
	if base = refCache[refKey{c, p}]; base == nil {
		base = Baseline(p, q, k, v, dO, c.Causal, c.EffectiveScale())
		refCache[refKey{c, p}] = base
	}
	return truth, base
}

type refKey struct {
	c Case
	p Precision // -1: the float64 truth
}

var (
	refMu    sync.Mutex
	refCache = map[refKey]*Ref{}
)

// CheckForward checks a Forward result against the truth and the baseline
// (in all its orders) of the same problem (the 2x-baseline rule of the package comment), and, for
// FP32, against the truth's per-element float32 error bounds. It reports
// every failure on t and returns whether all checks passed.
func CheckForward(t testing.TB, p Precision, truth, base *Ref, res *flashattn.Result) bool {
	t.Helper()
	out, lse, ok := checkForwardShape(t, truth, res)
	if out == nil {
		return false
	}
	d := truth.Dims
	bases := base.all()
	u32 := FP32.unitRoundoff()
	lseAt := func(r int) string { return fmt.Sprintf("[b=%d h=%d i=%d]", r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq) }
	ok = compare(t, "Out", out, truth.Out, field(bases, func(r *Ref) []float64 { return r.Out }), bshd(d.QShape()), 4*p.unitRoundoff()*truth.outMax) && ok
	// The LSE is float32 in every backend, whatever its inputs' precision.
	ok = compare(t, "LSE", lse, truth.LSE, field(bases, func(r *Ref) []float64 { return r.LSE }), lseAt, 4*u32*truth.lseMax) && ok
	if p == FP32 {
		ok = withinBound(t, "Out", out, truth.Out, truth.bOut, bshd(d.QShape())) && ok
		ok = withinBound(t, "LSE", lse, truth.LSE, truth.bLSE, lseAt) && ok
	}
	return ok
}

// CheckForwardBound checks a float32 Forward result for arbitrary inputs:
// the same structural checks as CheckForward, and every element within the
// truth's first-order float32 error bound (bound.go), which unlike the
// 2x-baseline rule cannot fail a correct backend by bad luck.
func CheckForwardBound(t testing.TB, truth *Ref, res *flashattn.Result) bool {
	t.Helper()
	out, lse, ok := checkForwardShape(t, truth, res)
	if out == nil {
		return false
	}
	d := truth.Dims
	lseAt := func(r int) string { return fmt.Sprintf("[b=%d h=%d i=%d]", r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq) }
	ok = withinBound(t, "Out", out, truth.Out, truth.bOut, bshd(d.QShape())) && ok
	return withinBound(t, "LSE", lse, truth.LSE, truth.bLSE, lseAt) && ok
}

// checkForwardShape checks shapes, that every element was written and is
// finite, and the exact values of rows that see no key. It returns the
// output (dense) and the LSE with those rows zeroed (nil if unusable).
func checkForwardShape(t testing.TB, truth *Ref, res *flashattn.Result) (out, lse []float32, ok bool) {
	t.Helper()
	d := truth.Dims
	switch {
	case res == nil || res.Out == nil:
		t.Errorf("Forward returned no result")
		return nil, nil, false
	case res.Out.Shape != d.QShape():
		t.Errorf("Out has shape %v, want %v", res.Out.Shape, d.QShape())
		return nil, nil, false
	case len(res.LSE) != d.LSELen():
		t.Errorf("LSE has %d elements, want %d", len(res.LSE), d.LSELen())
		return nil, nil, false
	}
	out = denseOf(res.Out)
	ok = allFinite(t, "Out", out, d.QShape())
	// Rows that see no key: output exactly 0, LSE exactly -Inf, never NaN.
	bad := 0
	for r, masked := range truth.Masked {
		b, h, i := r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq
		lse := res.LSE[r]
		switch {
		case masked && !math.IsInf(float64(lse), -1):
			bad++
			if bad == 1 {
				t.Errorf("LSE[b=%d h=%d i=%d] = %v (%s) for a row that sees no key, want -Inf", b, h, i, lse, describe(lse))
			}
		case masked:
			for x := 0; x < d.D; x++ {
				if o := out[((b*d.Nq+i)*d.Hq+h)*d.D+x]; o != 0 {
					bad++
					if bad == 1 {
						t.Errorf("Out[b=%d i=%d h=%d x=%d] = %v for a row that sees no key, want 0", b, i, h, x, o)
					}
				}
			}
		case math.IsNaN(float64(lse)) || math.IsInf(float64(lse), 0):
			bad++
			if bad == 1 {
				t.Errorf("LSE[b=%d h=%d i=%d] = %v (%s), want finite", b, h, i, lse, describe(lse))
			}
		}
	}
	if bad > 1 {
		t.Errorf("... %d bad LSE rows or masked-row outputs in all", bad)
	}
	lse = make([]float32, len(res.LSE))
	for r, x := range res.LSE {
		if !truth.Masked[r] { // masked rows were checked exactly above
			lse[r] = x
		}
	}
	return out, lse, bad == 0 && ok
}

// CheckBackward checks the gradients of a Backward call, made with the
// backend's own forward output and LSE, against the truth and the baselines
// (all computed with a dOut), and for FP32 against the truth's float32 error
// bounds. It returns whether all checks passed.
func CheckBackward(t testing.TB, p Precision, truth, base *Ref, g *flashattn.Grads) bool {
	t.Helper()
	bases := base.all()
	if slices.ContainsFunc(bases, func(r *Ref) bool { return r.DQ == nil }) {
		t.Errorf("CheckBackward: baselines computed without dOut")
		return false
	}
	dq, dk, dv, ok := checkBackwardShape(t, truth, g)
	if dq == nil {
		return false
	}
	d := truth.Dims
	u := p.unitRoundoff()
	ok = compare(t, "dQ", dq, truth.DQ, field(bases, func(r *Ref) []float64 { return r.DQ }), bshd(d.QShape()), 4*u*truth.gradMax[0]) && ok
	ok = compare(t, "dK", dk, truth.DK, field(bases, func(r *Ref) []float64 { return r.DK }), bshd(d.KVShape()), 4*u*truth.gradMax[1]) && ok
	ok = compare(t, "dV", dv, truth.DV, field(bases, func(r *Ref) []float64 { return r.DV }), bshd(d.KVShape()), 4*u*truth.gradMax[2]) && ok
	if p == FP32 {
		ok = gradsWithinBound(t, truth, dq, dk, dv) && ok
	}
	return ok
}

// CheckBackwardBound is CheckForwardBound for gradients.
func CheckBackwardBound(t testing.TB, truth *Ref, g *flashattn.Grads) bool {
	t.Helper()
	dq, dk, dv, ok := checkBackwardShape(t, truth, g)
	if dq == nil {
		return false
	}
	return gradsWithinBound(t, truth, dq, dk, dv) && ok
}

func gradsWithinBound(t testing.TB, truth *Ref, dq, dk, dv []float32) bool {
	t.Helper()
	d := truth.Dims
	ok := withinBound(t, "dQ", dq, truth.DQ, truth.bDQ, bshd(d.QShape()))
	ok = withinBound(t, "dK", dk, truth.DK, truth.bDK, bshd(d.KVShape())) && ok
	return withinBound(t, "dV", dv, truth.DV, truth.bDV, bshd(d.KVShape())) && ok
}

// checkBackwardShape checks shapes, finiteness and the exact zero dQ of rows
// that see no key, and returns the gradients dense (nil if unusable).
func checkBackwardShape(t testing.TB, truth *Ref, g *flashattn.Grads) (dq, dk, dv []float32, ok bool) {
	t.Helper()
	d := truth.Dims
	if truth.DQ == nil {
		t.Errorf("CheckBackward: truth computed without dOut")
		return nil, nil, nil, false
	}
	if g == nil || g.DQ == nil || g.DK == nil || g.DV == nil {
		t.Errorf("Backward returned no gradients")
		return nil, nil, nil, false
	}
	for _, c := range []struct {
		name      string
		got, want flashattn.Shape
	}{{"dQ", g.DQ.Shape, d.QShape()}, {"dK", g.DK.Shape, d.KVShape()}, {"dV", g.DV.Shape, d.KVShape()}} {
		if c.got != c.want {
			t.Errorf("%s has shape %v, want %v", c.name, c.got, c.want)
			return nil, nil, nil, false
		}
	}
	dq, dk, dv = denseOf(g.DQ), denseOf(g.DK), denseOf(g.DV)
	ok = allFinite(t, "dQ", dq, d.QShape())
	ok = allFinite(t, "dK", dk, d.KVShape()) && ok
	ok = allFinite(t, "dV", dv, d.KVShape()) && ok
	for r, masked := range truth.Masked {
		b, h, i := r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq
		for x := 0; masked && x < d.D; x++ {
			if g := dq[((b*d.Nq+i)*d.Hq+h)*d.D+x]; g != 0 {
				t.Errorf("dQ[b=%d i=%d h=%d x=%d] = %v for a row that sees no key, want 0", b, i, h, x, g)
				ok = false
				break
			}
		}
	}
	return dq, dk, dv, ok
}

// withinBound checks every element against its float32 error bound.
func withinBound(t testing.TB, name string, got []float32, truth, bound []float64, at func(int) string) bool {
	t.Helper()
	n, worst := 0, 0.0
	for i, w := range truth {
		if math.IsInf(w, -1) {
			continue
		}
		e := math.Abs(float64(got[i]) - w)
		if !(e <= bound[i]) {
			if n == 0 {
				t.Errorf("%s%s = %v, want %.8g within its float32 error bound %.3g (off by %.3g)", name, at(i), got[i], w, bound[i], e)
			}
			n++
		} else if bound[i] > 0 {
			worst = math.Max(worst, e/bound[i])
		}
	}
	if n > 1 {
		t.Errorf("... %d elements of %s beyond their bound in all", n, name)
	}
	if n == 0 {
		t.Logf("%-3s within float32 bounds (largest err/bound %.2f)", name, worst)
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
func compare(t testing.TB, name string, got []float32, truth []float64, bases [][]float64, at func(int) string, floor float64) bool {
	t.Helper()
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
	if !(eg <= lim) {
		t.Errorf("%s: max |err| %.3g at %s (got %v, want %.7g) > 2 x baseline %.3g + floor %.3g",
			name, eg, at(worst), got[worst], truth[worst], eb, floor)
		return false
	}
	ratio := 0.0
	if eb > 0 {
		ratio = eg / eb
	}
	t.Logf("%-3s max |err| %.2e, baseline %.2e (ratio %.2f), floor %.1e", name, eg, eb, ratio, floor)
	return true
}

// allFinite reports the first non-finite elements of got (dense in shape s),
// naming unwritten (poisoned) ones as such.
func allFinite(t testing.TB, name string, got []float32, s flashattn.Shape) bool {
	t.Helper()
	n := 0
	for i, x := range got {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			if n < 3 {
				t.Errorf("%s%s = %v (%s), want finite", name, bshd(s)(i), x, describe(x))
			}
			n++
		}
	}
	if n > 3 {
		t.Errorf("... %d non-finite elements of %s in all", n, name)
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

// runDeterministic runs forward and backward twice with
// Options.Deterministic on a GQA causal case and wants identical bits.
func runDeterministic(t *testing.T, b Backend) {
	var c Case
	for _, cc := range Cases() {
		if cc.Causal && cc.Hq > cc.Hkv && cc.Nq > 64 && b.supports(cc.D) && (b.MaxN == 0 || max(cc.Nq, cc.Nk) <= b.MaxN) {
			c = cc
			break
		}
	}
	if c.Name == "" {
		t.Skipf("%s supports no GQA causal case", b.Name)
	}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	o.Deterministic = true
	var runs [2][]uint32
	for r := range runs {
		res, err := b.Forward(q, k, v, o)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		runs[r] = append(snapshot(res.Out), snapshot(&flashattn.Tensor{Data: res.LSE})...)
		if b.Backward != nil {
			g, err := b.Backward(q, k, v, res.Out, dO, res.LSE, o)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			runs[r] = append(runs[r], snapshot(g.DQ, g.DK, g.DV)...)
		}
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Errorf("%s on %v: two runs with Deterministic differ", b.Name, c)
	}
}

// RunErrors checks that bad inputs give the library's typed errors, naming
// the offending argument and dimension.
func RunErrors(t *testing.T, b Backend) {
	D := 16
	if b.HeadDims != nil {
		D = b.HeadDims[0]
	}
	d := flashattn.Dims{B: 2, Nq: 5, Nk: 7, Hq: 4, Hkv: 2, D: D}
	q := flashattn.Random(d.QShape(), 1)
	k := flashattn.Random(d.KVShape(), 2)
	v := flashattn.Random(d.KVShape(), 3)
	out, dO := flashattn.New(d.QShape()), flashattn.Random(d.QShape(), 4)
	lse := make([]float32, d.LSELen())
	reshape := func(t *flashattn.Tensor, f func(*flashattn.Shape)) *flashattn.Tensor {
		s := t.Shape
		f(&s)
		return flashattn.Random(s, 9)
	}
	fwd := func(q, k, v *flashattn.Tensor, o *flashattn.Options) error {
		_, err := b.Forward(q, k, v, o)
		return err
	}
	bwd := func(out, dO *flashattn.Tensor, lse []float32, o *flashattn.Options) error {
		if b.Backward == nil {
			return &flashattn.DataError{Arg: "?", Reason: "no Backward: case not run"}
		}
		_, err := b.Backward(q, k, v, out, dO, lse, o)
		return err
	}
	short := *v
	short.Data = v.Data[:len(v.Data)-1]
	negStride := *q
	negStride.Strides[1] = -1
	nanLSE := slices.Clone(lse)
	nanLSE[3] = float32(math.NaN())
	shape := func(arg, dim string) func(error) string {
		return func(err error) string {
			var e *flashattn.ShapeError
			if !errors.As(err, &e) {
				return "want *flashattn.ShapeError"
			}
			if e.Arg != arg || e.Dim != dim || !strings.Contains(e.Error(), arg) {
				return fmt.Sprintf("want Arg %q Dim %q", arg, dim)
			}
			return ""
		}
	}
	data := func(arg string) func(error) string {
		return func(err error) string {
			var e *flashattn.DataError
			if !errors.As(err, &e) {
				return "want *flashattn.DataError"
			}
			if e.Arg != arg || !strings.Contains(e.Error(), arg) {
				return fmt.Sprintf("want Arg %q", arg)
			}
			return ""
		}
	}
	option := func(name string) func(error) string {
		return func(err error) string {
			var e *flashattn.OptionError
			if !errors.As(err, &e) {
				return "want *flashattn.OptionError"
			}
			if e.Option != name {
				return fmt.Sprintf("want Option %q", name)
			}
			return ""
		}
	}
	cases := []struct {
		name string
		err  error
		want func(error) string
	}{
		{"k-D-mismatch", fwd(q, reshape(k, func(s *flashattn.Shape) { s.D++ }), v, nil), shape("k", "D")},
		{"k-B-mismatch", fwd(q, reshape(k, func(s *flashattn.Shape) { s.B++ }), v, nil), shape("k", "B")},
		{"v-N-mismatch", fwd(q, k, reshape(v, func(s *flashattn.Shape) { s.N++ }), nil), shape("v", "N")},
		{"Hq-not-multiple-of-Hkv", fwd(reshape(q, func(s *flashattn.Shape) { s.H = 3 }), k, v, nil), shape("q", "H")},
		{"zero-N", fwd(reshape(q, func(s *flashattn.Shape) { s.N = 0 }), k, v, nil), shape("q", "N")},
		{"nil-q", fwd(nil, k, v, nil), data("q")},
		{"nil-data-k", fwd(q, &flashattn.Tensor{Shape: k.Shape, Strides: k.Strides}, v, nil), data("k")},
		{"short-v", fwd(q, k, &short, nil), data("v")},
		{"negative-stride-q", fwd(&negStride, k, v, nil), data("q")},
		{"NaN-scale", fwd(q, k, v, &flashattn.Options{Scale: math.NaN()}), option("Scale")},
		{"Inf-scale", fwd(q, k, v, &flashattn.Options{Scale: math.Inf(1)}), option("Scale")},
		{"scale-beyond-float32", fwd(q, k, v, &flashattn.Options{Scale: 1e39}), option("Scale")},
		{"backward-dOut-shape", bwd(out, reshape(dO, func(s *flashattn.Shape) { s.N-- }), lse, nil), shape("dOut", "N")},
		{"backward-nil-out", bwd(nil, dO, lse, nil), data("out")},
		{"backward-short-lse", bwd(out, dO, lse[:len(lse)-1], nil), data("lse")},
		{"backward-NaN-lse", bwd(out, dO, nanLSE, nil), data("lse")},
		{"backward-NaN-scale", bwd(out, dO, lse, &flashattn.Options{Scale: math.NaN()}), option("Scale")},
	}
	for _, c := range cases {
		if strings.HasPrefix(c.name, "backward") && b.Backward == nil {
			continue
		}
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		} else if msg := c.want(c.err); msg != "" {
			t.Errorf("%s: got %T %q: %s", c.name, c.err, c.err, msg)
		}
	}
}
