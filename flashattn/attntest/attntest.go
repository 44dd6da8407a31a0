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
// for the output, the LSE and each of dQ, dK, dV. The floor covers rounding
// that a correct backend pays and the baseline may happen not to (for N = 1
// the baseline is exact): 4 unit roundoffs (2 ulps) of the precision times
// the largest |truth| of the quantity (one final rounding of an output, the
// LSE being float32 everywhere). For the gradients the magnitude is the
// largest |truth| of dQ, dK and dV together: where Nk = 1, P = 1 and dP = D,
// so dQ and dK cancel to exactly 0, yet a backend that sums dP and D in
// different orders is left with a rounding residue far below an ulp of dV.
// Any real bug (a missed rescale, a wrong mask, an unwritten element) is
// orders of magnitude larger than the floor.
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
// of the same problem (see the package comment for the rule) and reports
// every failure on t. It returns whether all checks passed.
func CheckForward(t testing.TB, p Precision, truth, base *Ref, res *flashattn.Result) bool {
	t.Helper()
	d := truth.Dims
	switch {
	case res == nil || res.Out == nil:
		t.Errorf("Forward returned no result")
		return false
	case res.Out.Shape != d.QShape():
		t.Errorf("Out has shape %v, want %v", res.Out.Shape, d.QShape())
		return false
	case len(res.LSE) != d.LSELen():
		t.Errorf("LSE has %d elements, want %d", len(res.LSE), d.LSELen())
		return false
	}
	out := denseOf(res.Out)
	ok := allFinite(t, "Out", out, d.QShape())
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
	lse := make([]float32, len(res.LSE))
	for r, x := range res.LSE {
		if !truth.Masked[r] { // masked rows were checked exactly above
			lse[r] = x
		}
	}
	ok = bad == 0 && ok
	ok = compare(t, "Out", out, truth.Out, base.Out, bshd(d.QShape()), 4*p.unitRoundoff()*truth.outMax) && ok
	// The LSE is float32 in every backend, whatever its inputs' precision.
	lseAt := func(r int) string { return fmt.Sprintf("[b=%d h=%d i=%d]", r/(d.Hq*d.Nq), r/d.Nq%d.Hq, r%d.Nq) }
	ok = compare(t, "LSE", lse, truth.LSE, base.LSE, lseAt, 4*FP32.unitRoundoff()*truth.lseMax) && ok
	return ok
}

// CheckBackward checks the gradients of a Backward call, made with the
// backend's own forward output and LSE, against the truth and the baseline
// (both computed with a dOut). It returns whether all checks passed.
func CheckBackward(t testing.TB, p Precision, truth, base *Ref, g *flashattn.Grads) bool {
	t.Helper()
	d := truth.Dims
	if truth.DQ == nil || base.DQ == nil {
		t.Errorf("CheckBackward: references computed without dOut")
		return false
	}
	if g == nil || g.DQ == nil || g.DK == nil || g.DV == nil {
		t.Errorf("Backward returned no gradients")
		return false
	}
	for _, c := range []struct {
		name      string
		got, want flashattn.Shape
	}{{"dQ", g.DQ.Shape, d.QShape()}, {"dK", g.DK.Shape, d.KVShape()}, {"dV", g.DV.Shape, d.KVShape()}} {
		if c.got != c.want {
			t.Errorf("%s has shape %v, want %v", c.name, c.got, c.want)
			return false
		}
	}
	dq, dk, dv := denseOf(g.DQ), denseOf(g.DK), denseOf(g.DV)
	ok := allFinite(t, "dQ", dq, d.QShape())
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
	floor := 4 * p.unitRoundoff() * truth.gradMax
	ok = compare(t, "dQ", dq, truth.DQ, base.DQ, bshd(d.QShape()), floor) && ok
	ok = compare(t, "dK", dk, truth.DK, base.DK, bshd(d.KVShape()), floor) && ok
	ok = compare(t, "dV", dv, truth.DV, base.DV, bshd(d.KVShape()), floor) && ok
	return ok
}

// compare applies the tolerance rule to one quantity.
func compare(t testing.TB, name string, got []float32, truth, base []float64, at func(int) string, floor float64) bool {
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
		eb = math.Max(eb, math.Abs(base[i]-w))
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
