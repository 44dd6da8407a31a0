package flashattn

import (
	"fmt"
	"math"
)

// Backend names an implementation of attention.
type Backend int

const (
	// Auto picks the GPU when one is usable for the problem, else CPUFlash,
	// and says why in Result.Reason.
	Auto Backend = iota
	// CPUNaive materialises S = QK^T and P = softmax(S): O(N^2) memory.
	CPUNaive
	// CPUFlash is FlashAttention-2's tiled algorithm on the CPU: O(N) extra memory.
	CPUFlash
	// GPU runs the CUDA FlashAttention-2 kernels (fp16 in, fp32 accumulate).
	GPU
)

func (b Backend) String() string {
	switch b {
	case Auto:
		return "auto"
	case CPUNaive:
		return "cpu-naive"
	case CPUFlash:
		return "cpu-flash"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// ParseBackend turns "auto", "cpu-naive", "cpu-flash" or "gpu" into a Backend.
func ParseBackend(s string) (Backend, error) {
	for _, b := range []Backend{Auto, CPUNaive, CPUFlash, GPU} {
		if b.String() == s {
			return b, nil
		}
	}
	return Auto, &OptionError{Option: "Backend", Value: fmt.Sprintf("%q", s), Reason: "want auto, cpu-naive, cpu-flash or gpu"}
}

// Options control one Forward or Backward call. The zero value (or a nil
// *Options) means: not causal, scale 1/sqrt(D), automatic backend.
type Options struct {
	// Causal masks key j for query row i unless j <= i + Nk - Nq (the mask is
	// aligned to the bottom-right corner of the score matrix, as in
	// FlashAttention-2 since 2.1). With a Window it is Window.Right = 0.
	Causal bool
	// Window, when non-nil, is a sliding window (local attention): row i
	// sees key j only if i+Nk-Nq-Left <= j <= i+Nk-Nq+Right, bottom-right
	// aligned like Causal; -1 leaves a side unbounded, as does a reach past
	// every key (Left >= Nk, Right >= Nq; math.MaxInt is fine).
	Window *Window
	// Softcap, when > 0, caps every scaled score s to Softcap*tanh(s/Softcap)
	// before the bias and the softmax (Gemma 2's logit soft-capping).
	Softcap float64
	// ALiBi, when non-nil, holds one slope per query head (Hq of them): the
	// score of row i and key j gains the bias -slope*|i + Nk - Nq - j|.
	ALiBi []float64
	// Scale multiplies QK^T before the softmax; 0 means 1/sqrt(D). It must
	// be positive and finite.
	Scale float64
	// Deterministic asks for bit-reproducible results. It matters for the
	// GPU backward on the sm_80 path at the head dims with a single-pass
	// kernel (D 64, 128 and 256) and on the Hopper path (D 64 and 128;
	// Device.Kernels of OpBackward lists what runs): by default
	// that runs FA2's single pass, which adds dQ with float32 atomics in no
	// fixed order, so dQ may differ in its last bits from call to call;
	// Deterministic runs, where the device runs a large single-pass tile
	// (D 128 and 256 on A100, H100/H200; D 64 causal), at D 256 everywhere
	// on the sm_80 path and at D 64 and 128 on the Hopper one, the same single pass with the dQ
	// additions in a fixed order (key block after key block, each waiting for
	// the one before it; its dQ accumulator carries one int32 counter per
	// query block), elsewhere the three-kernel backward (dK/dV and dQ kernels
	// that each own their outputs, no atomics). Every other backward (CPU, Turing, other head
	// dims) and every forward is deterministic whatever its value. What it
	// costs: docs/performance.md ("det" columns) and docs/kernels.md.
	Deterministic bool
	// Backend chooses the implementation; Auto by default.
	Backend Backend
	// BlockQ and BlockK are the CPU flash tile sizes Br and Bc (0: 64);
	// one at least Nq (Nk) makes a single block.
	BlockQ, BlockK int
	// Workers bounds the CPU goroutines (0: GOMAXPROCS, at most MaxWorkers).
	Workers int
	// Trace, when non-nil, is filled by the CPUFlash forward pass (Auto then
	// picks CPUFlash). A forward call that records none refuses it with an
	// *OptionError: on CPUNaive or GPU, the Device methods, the varlen calls
	// (forward and backward) and the KV-cache calls. Backward, BackwardContext,
	// Device.Backward and BackwardHost ignore it on every backend, so one
	// Options serves a Forward and its Backward. One call at a time may
	// fill a Trace (see Trace).
	Trace *Trace
	// Device is the GPU ordinal used by the GPU backend (default 0; >= 0).
	Device int
}

// Window is a sliding window's reach: keys up to Left before and Right after
// a row's diagonal key i+Nk-Nq (-1: unbounded on that side).
type Window struct{ Left, Right int }

// MaxWorkers bounds Options.Workers: every CPU goroutine holds its own tiles,
// and far more goroutines than cores only multiply that memory.
const MaxWorkers = 1024

// scale returns the softmax scale for head dim d, or an OptionError.
func (o *Options) scale(d int) (float64, error) {
	if o == nil || o.Scale == 0 {
		return 1 / math.Sqrt(float64(d)), nil
	}
	if math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		return 0, &OptionError{Option: "Scale", Value: fmt.Sprint(o.Scale), Reason: "must be finite"}
	}
	// The kernels mask a score by setting it to -Inf before the scale is
	// applied, and every softmax implementation here assumes a larger score
	// means more weight: a negative scale would break both.
	if o.Scale < 0 {
		return 0, &OptionError{Option: "Scale", Value: fmt.Sprint(o.Scale), Reason: "must be positive (0 means 1/sqrt(D))"}
	}
	// Every backend multiplies scores by a float32 scale.
	if math.Abs(o.Scale) > math.MaxFloat32 {
		return 0, &OptionError{Option: "Scale", Value: fmt.Sprint(o.Scale), Reason: "does not fit in float32"}
	}
	return o.Scale, nil
}

// problem is one call after its options are resolved: every entry point
// (Forward, Backward, the Device methods, the benchmarks) validates its
// Options once, with resolve, and passes this on.
type problem struct {
	Dims
	Scale  float64 // the softmax scale, 1/sqrt(D) unless Options.Scale
	Causal bool    // Right == 0: every key after the diagonal is hidden
	// Left and Right are the window's reach around the diagonal, -1 for
	// unbounded; Options.Causal is folded into Right = 0.
	Left, Right int
	Softcap     float64   // 0: no cap
	ALiBi       []float64 // nil, or one slope per query head
	// entry is the sibling entry point that made the problem: "" for
	// Forward and Backward, "varlen", "KV cache".
	entry string
	// varlen: the packed sequences of a varlen problem (entry "varlen"; Dims
	// are the packed tensors'), nil otherwise.
	varlen *Varlen
	// Deterministic: Options.Deterministic (the GPU backward's path).
	Deterministic bool
}

// mask is the problem's mask and score modifiers (every key visible and
// every score unmodified without causal, window, softcap and ALiBi).
func (p problem) mask() scoreMask {
	m := scoreMask{off: p.CausalOffset(), nk: p.Nk, left: p.Left, right: p.Right, softcap: float32(p.Softcap)}
	if p.ALiBi != nil {
		m.alibi = make([]float32, len(p.ALiBi))
		for h, s := range p.ALiBi {
			m.alibi[h] = float32(s)
		}
	}
	return m
}

// checkLSE checks a log-sum-exp buffer given to a backward pass (see
// Dims.checkLSE) and that only rows the mask hides every key from have
// LSE -Inf: any other row has a positive softmax sum, and a -Inf there
// would silently zero its gradients.
func (p problem) checkLSE(lse []float32) error {
	lastNoKey, err := p.Dims.checkLSE(lse)
	if err != nil {
		return err
	}
	return p.checkNoKeyRows(lastNoKey)
}

// checkNoKeyRows checks that row lastNoKey (-1: none) of a -Inf LSE sees no key.
func (p problem) checkNoKeyRows(lastNoKey int) error {
	// The rows that see no key are a prefix (only a bounded Right hides
	// every key, from rows i < Nq-Nk-Right), so checking the last -Inf row suffices.
	if lastNoKey >= 0 && p.mask().seesAny(lastNoKey) {
		return &DataError{Arg: "lse", Reason: fmt.Sprintf("row %d is -Inf but sees keys (causal %t, window [%d, %d], Nq %d, Nk %d): only a row that sees no key has LSE -Inf",
			lastNoKey, p.Causal, p.Left, p.Right, p.Nq, p.Nk)}
	}
	return nil
}

// resolve validates o for problem d and returns the problem with its scale
// and mask, or an *OptionError.
func (o *Options) resolve(d Dims) (problem, error) {
	scale, err := o.scale(d.D)
	if err != nil {
		return problem{}, err
	}
	p := problem{Dims: d, Scale: scale, Left: -1, Right: -1}
	if o == nil {
		return p, nil
	}
	if err := o.resolveScores(&p); err != nil {
		return problem{}, err
	}
	p.Deterministic = o.Deterministic
	if o.BlockQ < 0 || o.BlockK < 0 {
		return problem{}, &OptionError{Option: "BlockQ/BlockK", Value: fmt.Sprint(o.BlockQ, o.BlockK), Reason: "must be >= 0"}
	}
	if o.Workers < 0 || o.Workers > MaxWorkers {
		return problem{}, &OptionError{Option: "Workers", Value: fmt.Sprint(o.Workers), Reason: fmt.Sprintf("want 0 (GOMAXPROCS) to MaxWorkers (%d)", MaxWorkers)}
	}
	if o.Backend < Auto || o.Backend > GPU {
		return problem{}, &OptionError{Option: "Backend", Value: o.Backend.String(), Reason: "unknown backend"}
	}
	if o.Device < 0 {
		return problem{}, &OptionError{Option: "Device", Value: fmt.Sprint(o.Device), Reason: "must be >= 0"}
	}
	if o.Trace != nil && (o.Backend == CPUNaive || o.Backend == GPU) {
		return problem{}, &OptionError{Option: "Trace", Value: "set", Reason: fmt.Sprintf("backend %s records no trace: only cpu-flash (or auto, which then picks it) does", o.Backend)}
	}
	if t := o.Trace; t != nil {
		if t.Batch < 0 || t.Batch >= d.B || t.Head < 0 || t.Head >= d.Hq || t.Row < 0 || t.Row >= d.Nq {
			return problem{}, &OptionError{Option: "Trace", Value: fmt.Sprintf("batch %d head %d row %d", t.Batch, t.Head, t.Row),
				Reason: fmt.Sprintf("outside B=%d Hq=%d Nq=%d", d.B, d.Hq, d.Nq)}
		}
	}
	return p, nil
}

// resolveScores sets p's window, softcap and ALiBi slopes from o.
func (o *Options) resolveScores(p *problem) error {
	if w := o.Window; w != nil {
		if w.Left < -1 || w.Right < -1 {
			return &OptionError{Option: "Window", Value: fmt.Sprintf("%+v", *w), Reason: "Left and Right must be >= 0, or -1 for unbounded"}
		}
		if o.Causal && w.Right > 0 {
			return &OptionError{Option: "Window", Value: fmt.Sprintf("%+v", *w), Reason: "Causal hides every key after the diagonal: Right must be 0 or -1"}
		}
		p.Left, p.Right = w.Left, w.Right
		// A reach past every key is unbounded (row i's diagonal key is at
		// most Nk-1 keys after key 0 and Nq-1 before the last): as -1, so
		// no backend adds it to an index (math.MaxInt for "no limit" would
		// overflow there) or narrows it to the kernels' int32.
		if p.Left >= p.Nk {
			p.Left = -1
		}
		if p.Right >= p.Nq {
			p.Right = -1
		}
	}
	if o.Causal {
		p.Right = 0
	}
	p.Causal = p.Right == 0 // Window{-1, 0} is the causal mask, as in FA2
	if c := o.Softcap; c != 0 {
		// The backends cap in float32: a cap that rounds to 0 there would turn it off.
		if math.IsNaN(c) || c < 0 || c > math.MaxFloat32 || float32(c) == 0 {
			return &OptionError{Option: "Softcap", Value: fmt.Sprint(c), Reason: "must be 0 (off) or positive and within float32"}
		}
		p.Softcap = c
	}
	if o.ALiBi != nil {
		if len(o.ALiBi) != p.Hq {
			return &OptionError{Option: "ALiBi", Value: fmt.Sprintf("%d slopes", len(o.ALiBi)), Reason: fmt.Sprintf("want one per query head (Hq = %d)", p.Hq)}
		}
		for h, s := range o.ALiBi {
			// A slope times a distance must stay a float32 score.
			if math.IsNaN(s) || math.Abs(s)*float64(max(p.Nq, p.Nk)) > math.MaxFloat32 {
				return &OptionError{Option: "ALiBi", Value: fmt.Sprint(s), Reason: fmt.Sprintf("slope of head %d must be finite and its largest bias within float32", h)}
			}
		}
		p.ALiBi = o.ALiBi
	}
	return nil
}

// noTrace refuses a Trace in a call that records none (what names it).
func noTrace(o *Options, what string) error {
	if o != nil && o.Trace != nil {
		return &OptionError{Option: "Trace", Value: "set", Reason: what + " records no trace: only Forward on cpu-flash (or auto, which then picks it) fills one"}
	}
	return nil
}

// withoutTrace is o with Trace nil (o itself when it has none): what a
// backward call, which ignores a Trace, runs with.
func (o *Options) withoutTrace() *Options {
	if o == nil || o.Trace == nil {
		return o
	}
	c := *o
	c.Trace = nil
	return &c
}
