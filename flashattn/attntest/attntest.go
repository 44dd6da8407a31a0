// Package attntest is the conformance suite every flashattn backend runs
// (CPU naive, CPU flash, GPU), in the style of gonum's testblas: one
// exported Run that a backend's own test calls with a Backend value.
//
// Truth is a float64 textbook computation written here, independent of the
// backends (Reference). Tolerances follow the FlashAttention-2 tests: a
// baseline is the same textbook computation in the backend's precision
// (Baseline: float32 arithmetic for FP32; fp16-rounded inputs, P, dS and
// outputs with float32 accumulation for FP16, bf16-rounded for BF16), and a backend passes when
//
//	maxErr(backend, truth) <= 2 * maxErr(baseline, truth) + floor
//
// for the output, the LSE and each of dQ, dK, dV.
//
// The textbook fixes no summation order, and one order alone can be lucky:
// where P is near 1, dS = P (dP - Di) cancels dP = dO.v against Di = dO.O, and
// a baseline that sums both in the same order sees their rounding cancel too
// (with Nk = 1 it gets dQ = dK = 0 exactly), which a correct backend
// summing them apart (FA2 computes Di in a kernel of its own) does not. So
// the baseline error is the largest over three orders: sequential, reversed,
// and pairwise (a GPU's tree reduction), Di always sequential. The floor is 4
// unit roundoffs (2 ulps) of the precision times the largest |truth| of the
// quantity (of a varlen or KV-cache call: over all its sequences): the last rounding of an output, which a baseline may happen not
// to pay (for N = 1 it is exact; the LSE is float32 in every backend). A
// gradient whose truth is 0 everywhere (each row sees one key, so dS = dP -
// Di = 0) has the largest element of its float32 error bound (bound.go) as
// its floor instead: all a backend adds there is float32 sums' rounding,
// which tensor cores (k8/k16 pieces) need not keep within 2x the baseline's
// three orders (a D 256 Turing backward measured 3.4x). A
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
// is finite, that rows which see no key (causal or a window with Nq > Nk) give output 0,
// LSE -Inf and dQ 0 exactly, that inputs are left untouched, that bad inputs
// return the library's typed errors, and that results are bit-reproducible
// with Options.Deterministic.
//
// Cases with a sliding window, softcap or ALiBi (Case.Mods) have their truth
// and baselines from ReferenceScores and BaselineScores; a Plain backend
// must refuse them with a *flashattn.UnsupportedError (with ModsForward, only
// in Backward).
//
// The checks are pure functions: CompareForward and CompareBackward return
// what they found (a Comparison), which CheckForward and CheckBackward
// report on a testing.TB and programs (goflash check, demo) use directly.
package attntest

import (
	"fmt"
	"slices"

	"github.com/goflash/goflash/flashattn"
)

// Precision is the arithmetic a backend is held to.
type Precision int

const (
	// FP32: float32 inputs, arithmetic and outputs (the CPU backends).
	FP32 Precision = iota
	// FP16: fp16 inputs, P, dS and outputs, float32 accumulation (the GPU kernels).
	FP16
	// BF16: bfloat16 inputs, P, dS and outputs, float32 accumulation (the
	// bf16 kernels of the sm_80 path, forward and backward).
	BF16
)

func (p Precision) String() string {
	switch p {
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return "fp32"
}

func (p Precision) round(x float32) float32 {
	switch p {
	case FP16:
		return RoundHalf(x)
	case BF16:
		return RoundBF16(x)
	}
	return x
}

// unitRoundoff is half the distance from 1 to the next representable number.
func (p Precision) unitRoundoff() float64 {
	switch p {
	case FP16:
		return 0x1p-11
	case BF16:
		return 0x1p-8
	}
	return 0x1p-24
}

// Backend is what the suite needs from one implementation.
type Backend struct {
	Name     string
	Forward  func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error)
	Backward func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) // nil: forward only
	// The sibling entry points (nil: their cases are skipped).
	ForwardVarlen  func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Result, error)
	BackwardVarlen func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error)
	ForwardKVCache func(q, kCache, vCache *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error)
	// ForwardKVCacheAppend writes kNew, vNew into the host kCache, vCache
	// (a device backend copies its cache back) and decodes.
	ForwardKVCacheAppend func(q, kNew, vNew, kCache, vCache *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error)
	// Precision the backend is held to.
	Precision Precision
	// HeadDims lists the supported head dims (nil: all). For any other D,
	// Forward and Backward must return a *flashattn.UnsupportedError.
	HeadDims []int
	// MaxN, when > 0, skips cases with Nq or Nk above it (for slow backends).
	MaxN int
	// Plain backends run no score modifier (Case.Mods; varlen and KV-cache
	// calls without modifiers they run): for those cases they must return a
	// *flashattn.UnsupportedError.
	Plain bool
	// ModsForward: a Plain backend whose Forward runs the score modifiers
	// (its Backward, except at ModsBackward's head dims, and its varlen
	// calls still refuse them).
	ModsForward bool
	// ModsKVCache: a Plain backend whose KV-cache calls run the score modifiers.
	ModsKVCache bool
	// ModsVarlen lists the head dims at which a Plain backend's varlen calls
	// run the score modifiers (forward; backward where VarlenBackward has it too).
	ModsVarlen []int
	// ModsBackward lists the head dims (of HeadDims) at which a ModsForward
	// backend's Backward runs the score modifiers too.
	ModsBackward []int
	// VarlenBackward lists the head dims at which BackwardVarlen runs the
	// varlen cases whose forward runs (nil: every one); at the others it must
	// refuse them.
	VarlenBackward []int
}

func (b Backend) supports(d int) bool { return b.HeadDims == nil || slices.Contains(b.HeadDims, d) }

// supportsCase reports whether b runs case c (else it must refuse it).
func (b Backend) supportsCase(c Case) bool { return b.supports(c.D) && !(b.Plain && c.Mods()) }

// supportsKVCase reports whether b's KV-cache calls run case c.
func (b Backend) supportsKVCase(c Case) bool {
	return b.supportsCase(c) || b.supports(c.D) && b.ModsKVCache
}

// runsCall reports whether b's Forward runs case c (the plain call: Plain
// backends refuse score modifiers unless ModsForward).
func (b Backend) runsCall(c Case) bool { return b.supportsCase(c) || b.supports(c.D) && b.ModsForward }

// forwardOnly reports whether b runs case c forward but must refuse its backward.
func (b Backend) forwardOnly(c Case) bool {
	return !b.supportsCase(c) && b.runsCall(c) && !slices.Contains(b.ModsBackward, c.D)
}

// runsVarlen reports whether b's varlen forward runs case c (Plain
// backends refuse score modifiers unless ModsVarlen).
func (b Backend) runsVarlen(c Case) bool {
	return b.supportsCase(c) || b.supports(c.D) && slices.Contains(b.ModsVarlen, c.D)
}

// varlenForwardOnly reports whether b's varlen calls run case c forward but
// must refuse its backward.
func (b Backend) varlenForwardOnly(c Case) bool {
	return b.runsVarlen(c) && b.VarlenBackward != nil && !slices.Contains(b.VarlenBackward, c.D)
}

// ForBackend runs a library backend through the public API
// (flashattn.Forward and Backward with Options.Backend = be), and fails a
// call whose Result says another backend ran. GPU is held to FP16, the CPU
// backends to FP32; set HeadDims, ModsBackward, ModsVarlen, VarlenBackward and MaxN on the result as needed.
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
	ran := func(got flashattn.Backend, reason string) error {
		if got != be {
			return fmt.Errorf("attntest: asked for backend %v, %v ran (%s)", be, got, reason)
		}
		return nil
	}
	return Backend{
		Name:        be.String(),
		Plain:       be == flashattn.GPU, // with the Mods* below: the GPU runs them where it has the kernels
		ModsForward: be == flashattn.GPU, // set ModsBackward: the head dims whose backward runs them
		ModsKVCache: be == flashattn.GPU, // the decode kernel runs them
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
		ForwardVarlen: func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Result, error) {
			res, err := flashattn.ForwardVarlen(q, k, v, vl, with(o))
			if err == nil {
				err = ran(res.Backend, res.Reason)
			}
			return res, err
		},
		BackwardVarlen: func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error) {
			g, err := flashattn.BackwardVarlen(q, k, v, out, dOut, lse, vl, with(o))
			if err == nil {
				err = ran(g.Backend, g.Reason)
			}
			return g, err
		},
		ForwardKVCache: func(q, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
			res, err := flashattn.ForwardKVCache(q, kc, vc, c, with(o))
			if err == nil {
				err = ran(res.Backend, res.Reason)
			}
			return res, err
		},
		ForwardKVCacheAppend: func(q, kn, vn, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
			res, err := flashattn.ForwardKVCacheAppend(q, kn, vn, kc, vc, c, with(o))
			if err == nil {
				err = ran(res.Backend, res.Reason)
			}
			return res, err
		},
		Precision: p,
	}
}
