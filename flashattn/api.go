package flashattn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/goflash/goflash/internal/cuda"
)

// Result is the output of Forward.
type Result struct {
	Dims Dims
	// Out is (B, Nq, Hq, D), dense.
	Out *Tensor
	// LSE is the natural log-sum-exp of each row's scaled scores, (B, Hq, Nq);
	// a row that sees no key (causal, or a window's Right, with Nq > Nk) has
	// LSE -Inf and output 0.
	LSE []float32
	// Backend is the implementation that ran; Reason says why it was chosen
	// (for Auto: which GPU, or why the CPU was used instead).
	Backend Backend
	Reason  string
}

// Grads is the output of Backward.
type Grads struct {
	DQ, DK, DV *Tensor
	Backend    Backend
	Reason     string
}

// impl is one backend. Inputs and options are validated before it is
// called; out, lse and the gradients are dense and sized from p.Dims. o is
// read only for what is not part of the problem (workers, tiles, trace).
type impl interface {
	// forward and backward stop between jobs once ctx is done (the CPU
	// backends), returning ctx.Err().
	forward(ctx context.Context, p problem, q, k, v *Tensor, o *Options, out *Tensor, lse []float32) error
	backward(ctx context.Context, p problem, q, k, v, out, dOut *Tensor, lse []float32, o *Options, dq, dk, dv *Tensor) error
	// hostBytes is the host memory a call allocates beyond its outputs.
	hostBytes(p problem, o *Options, backward bool) float64
}

// reserveCall refuses a call of im that would allocate more host memory,
// outputs included, than HostMemoryLimit: before anything is allocated.
func reserveCall(be Backend, im impl, p problem, o *Options, backward bool) error {
	what, out := "Forward", floats(p.QShape().Numel(), p.LSELen())
	if backward {
		what, out = "Backward", floats(p.QShape().Numel(), 2*p.KVShape().Numel())
	}
	return reserve(fmt.Sprintf("%s of %+v on %s", what, p.Dims, be), out+im.hostBytes(p, o, backward))
}

// Forward computes softmax(S) V and the log-sum-exp of every row, S being
// scale * Q K^T, softcapped and ALiBi-biased as Options say, with the
// masked keys (causal, window) left out. q is (B, Nq, Hq, D); k and v are
// (B, Nk, Hkv, D).
//
// Only a row the mask hides every key from has output 0 and LSE -Inf.
// On the CPU, a NaN or Inf among the inputs, or a score scale*q.k
// beyond float32, makes the rows it reaches NaN, output and LSE (Backward
// refuses a NaN LSE). The GPU takes only values fp16 can hold, finite and
// below 65520 in magnitude, and scales at which its float32 scores cannot
// overflow: with Backend GPU other inputs are a *DataError naming the
// element (an *UnsupportedError for the scale), and Auto runs them on the
// CPU and says why.
func Forward(q, k, v *Tensor, opts *Options) (*Result, error) {
	return ForwardContext(context.Background(), q, k, v, opts)
}

// ForwardContext is Forward that stops early once ctx is done, returning
// ctx.Err() (wrapped): the CPU backends check it between jobs (a Q block of
// CPUFlash, a row of CPUNaive) and CPUFlash also between the K blocks of a
// job and every few rows of a tile (about 2^18 multiply-adds apart), so a
// cancel takes effect within milliseconds even when one tile is as large
// as the problem (BlockQ = BlockK >= N); a GPU call, already queued, runs
// to its end.
func ForwardContext(ctx context.Context, q, k, v *Tensor, opts *Options) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flashattn: Forward: %w", err)
	}
	p, err := checkForward(q, k, v, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(p, opts, false, q, k, v)
	if err != nil {
		return nil, err
	}
	if err := reserveCall(be, im, p, opts, false); err != nil {
		return nil, err
	}
	out := newOutput(p.QShape())
	lse := newBuffer(p.LSELen())
	if err := im.forward(ctx, p, q, k, v, opts, out, lse); err != nil {
		return nil, err
	}
	return &Result{Dims: p.Dims, Out: out, LSE: lse, Backend: be, Reason: reason}, nil
}

// checkForward validates the arguments of a forward call on host tensors.
func checkForward(q, k, v *Tensor, opts *Options) (problem, error) {
	d, err := DimsOf(q, k, v)
	if err != nil {
		return problem{}, err
	}
	return opts.resolve(d)
}

// Backward computes dQ, dK and dV of Forward's output given dOut, from the
// inputs, the output and the LSE of the forward pass (FA2 recomputes P from
// the LSE instead of storing it).
func Backward(q, k, v, out, dOut *Tensor, lse []float32, opts *Options) (*Grads, error) {
	return BackwardContext(context.Background(), q, k, v, out, dOut, lse, opts)
}

// BackwardContext is Backward that stops early once ctx is done, as
// ForwardContext.
//
// Backward records no trace and ignores Options.Trace on every backend (it
// runs as with a nil Trace), so that one Options serves a Forward call and
// its Backward.
func BackwardContext(ctx context.Context, q, k, v, out, dOut *Tensor, lse []float32, opts *Options) (*Grads, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flashattn: Backward: %w", err)
	}
	opts = opts.withoutTrace()
	p, err := checkBackward(q, k, v, out, dOut, lse, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(p, opts, true, q, k, v, out, dOut)
	if err != nil {
		return nil, err
	}
	if err := reserveCall(be, im, p, opts, true); err != nil {
		return nil, err
	}
	g := &Grads{DQ: newOutput(p.QShape()), DK: newOutput(p.KVShape()), DV: newOutput(p.KVShape()), Backend: be, Reason: reason}
	if err := im.backward(ctx, p, q, k, v, out, dOut, lse, opts, g.DQ, g.DK, g.DV); err != nil {
		return nil, err
	}
	return g, nil
}

// checkBackward validates the arguments of a backward call on host tensors.
func checkBackward(q, k, v, out, dOut *Tensor, lse []float32, opts *Options) (problem, error) {
	d, err := DimsOf(q, k, v)
	if err != nil {
		return problem{}, err
	}
	if err := checkOutputs(d, out, dOut); err != nil {
		return problem{}, err
	}
	p, err := opts.resolve(d)
	if err != nil {
		return problem{}, err
	}
	return p, p.checkLSE(lse)
}

// checkOutputs checks the forward output and its gradient given to a
// backward pass: both q-shaped.
func checkOutputs(d Dims, out, dOut *Tensor) error {
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"out", out}, {"dOut", dOut}} {
		if err := a.t.check(a.name); err != nil {
			return err
		}
		if err := expectShape(a.name, a.t.Shape, d.QShape()); err != nil {
			return err
		}
	}
	return nil
}

// poisonOutputs makes Forward and Backward fill the buffers they allocate
// with NaN before a backend writes them, so that tests see every element a
// backend leaves unwritten. Only tests set it.
var poisonOutputs bool

// newBuffer allocates an output buffer: zero, or NaN under tests.
func newBuffer(n int) []float32 {
	b := make([]float32, n)
	if poisonOutputs {
		nan := float32(math.NaN())
		for i := range b {
			b[i] = nan
		}
	}
	return b
}

// newOutput allocates a dense output tensor with newBuffer.
func newOutput(s Shape) *Tensor {
	return &Tensor{Shape: s, Strides: s.ContiguousStrides(), Data: newBuffer(s.Numel())}
}

// pick resolves the backend for one call on inputs ins (q, k, v, and for
// the backward out and dOut). Auto falls back to CPUFlash for any reason
// the GPU cannot run the problem, and says which.
func pick(p problem, o *Options, backward bool, ins ...*Tensor) (Backend, string, impl, error) {
	want := Auto
	if o != nil {
		want = o.Backend
	}
	if o != nil && o.Trace != nil && want == Auto {
		want = CPUFlash // only the CPU flash path can report its steps
	}
	switch want {
	case CPUNaive:
		return CPUNaive, "requested", naiveImpl{}, nil
	case CPUFlash:
		return CPUFlash, "requested", flashImpl{}, nil
	case GPU:
		im, reason, err := gpuFor(p, o, backward, ins...)
		if err != nil {
			return GPU, "", nil, err
		}
		return GPU, reason, im, nil
	}
	im, reason, err := gpuFor(p, o, backward, ins...)
	if err == nil {
		return GPU, reason, im, nil
	}
	return CPUFlash, "GPU not used: " + fallbackReason(err), flashImpl{}, nil
}

// fallbackReason is why Auto did not use the GPU, in one short line: the
// common cases (no driver, no device) by name, anything else as its error
// says. `goflash check` prints the whole chain (every path tried for the
// driver, each device's error).
func fallbackReason(err error) string {
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		return "no NVIDIA driver found (libcuda.so.1)"
	case errors.Is(err, cuda.ErrNoDevice):
		return "the NVIDIA driver sees no GPU"
	}
	return strings.TrimPrefix(err.Error(), "flashattn: ")
}
