package attntest

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// Run runs the whole suite against b: the error cases, every case of
// Cases() forward and backward, the varlen and KV-cache cases, and the
// determinism check.
func Run(t *testing.T, b Backend) {
	t.Run("errors", func(t *testing.T) { RunErrors(t, b) })
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) { RunCase(t, b, c) })
	}
	RunVarlen(t, b)
	RunKVCache(t, b)
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
	fwdOnly := b.forwardOnly(c)
	if !b.runsCall(c) {
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
	truth, base := refs(c, b.Precision, q, k, v, dO, b.Backward != nil && !fwdOnly)
	CheckForward(t, b.Precision, truth, base, res)
	switch {
	case b.Backward == nil:
		t.Logf("%s has no Backward: forward checked only", b.Name)
	case fwdOnly:
		_, err := b.Backward(q, k, v, res.Out, dO, res.LSE, o)
		expectUnsupported(t, "Backward", c, err)
	default:
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

// RunCaseBatches runs c on b forward and backward like RunCase, and checks
// the batch entries listed against the reference, each as a problem of its
// own: for a batch whose whole reference would take minutes (the backend
// still computes every entry, so a launch that loses or repeats one shows in
// the entries checked).
func RunCaseBatches(t testing.TB, b Backend, c Case, batches []int) {
	t.Helper()
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	res, err := b.Forward(q, k, v, o)
	if err != nil {
		t.Fatalf("%s: Forward(%v): %v", b.Name, c, err)
	}
	g, err := b.Backward(q, k, v, res.Out, dO, res.LSE, o)
	if err != nil {
		t.Fatalf("%s: Backward(%v): %v", b.Name, c, err)
	}
	one := c
	one.B = 1
	rows := c.Hq * c.Nq // one entry's LSE
	for _, i := range batches {
		qi, ki, vi, dOi := batchOf(q, i), batchOf(k, i), batchOf(v, i), batchOf(dO, i)
		truth := ReferenceScores(qi, ki, vi, dOi, c.Causal, c.EffectiveScale(), ScoresOf(o))
		base := BaselineScores(b.Precision, qi, ki, vi, dOi, c.Causal, c.EffectiveScale(), ScoresOf(o))
		r := &flashattn.Result{Dims: one.Dims(), Out: batchOf(res.Out, i), LSE: res.LSE[i*rows : (i+1)*rows]}
		if !CheckForward(t, b.Precision, truth, base, r) {
			t.Errorf("%s on %v: batch entry %d's forward is wrong", b.Name, c, i)
		}
		gi := &flashattn.Grads{DQ: batchOf(g.DQ, i), DK: batchOf(g.DK, i), DV: batchOf(g.DV, i)}
		if !CheckBackward(t, b.Precision, truth, base, gi) {
			t.Errorf("%s on %v: batch entry %d's gradients are wrong", b.Name, c, i)
		}
	}
}

// batchOf is batch entry i of x as a dense tensor of B = 1.
func batchOf(x *flashattn.Tensor, i int) *flashattn.Tensor {
	s := x.Shape
	s.B = 1
	y := flashattn.New(s)
	for n := range s.N {
		for h := range s.H {
			copy(y.Row(0, n, h), x.Row(i, n, h))
		}
	}
	return y
}

func expectUnsupported(t *testing.T, call string, c Case, err error) {
	t.Helper()
	var ue *flashattn.UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("%s(%v), unsupported by the backend: got error %v, want *flashattn.UnsupportedError", call, c, err)
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
// of a test binary runs the same cases. With grads false (a check of the
// forward alone) they need no gradients: a cached pair that has them serves,
// else the pair is computed without them, about a third of the work.
func refs(c Case, p Precision, q, k, v, dO *flashattn.Tensor, grads bool) (truth, base *Ref) {
	refMu.Lock()
	defer refMu.Unlock()
	get := func(prec Precision, compute func(dO *flashattn.Tensor) *Ref) *Ref {
		key := refKey{c.String(), c.Seed, prec, true}
		if r := refCache[key]; r != nil {
			return r
		}
		key.grads = grads
		if r := refCache[key]; r != nil {
			return r
		}
		in := dO
		if !grads {
			in = nil
		}
		r := compute(in)
		refCache[key] = r
		return r
	}
	truth = get(-1, func(dO *flashattn.Tensor) *Ref {
		return ReferenceScores(q, k, v, dO, c.Causal, c.EffectiveScale(), ScoresOf(c.Options()))
	})
	base = get(p, func(dO *flashattn.Tensor) *Ref {
		return BaselineScores(p, q, k, v, dO, c.Causal, c.EffectiveScale(), ScoresOf(c.Options()))
	})
	return truth, base
}

// refKey names a case by its String (every field but the seed) and seed.
type refKey struct {
	c     string
	seed  uint64
	p     Precision // -1: the float64 truth
	grads bool      // with the gradients (dO given)
}

var (
	refMu    sync.Mutex
	refCache = map[refKey]*Ref{}
)
