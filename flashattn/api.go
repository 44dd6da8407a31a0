package flashattn

import "math"

// Result is the output of Forward.
type Result struct {
	Dims Dims
	// Out is (B, Nq, Hq, D), dense.
	Out *Tensor
	// LSE is the natural log-sum-exp of each row's scaled scores, (B, Hq, Nq);
	// a row that sees no key (causal with Nq > Nk) has LSE -Inf and output 0.
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
	forward(p problem, q, k, v *Tensor, o *Options, out *Tensor, lse []float32) error
	backward(p problem, q, k, v, out, dOut *Tensor, lse []float32, o *Options, dq, dk, dv *Tensor) error
}

// Forward computes softmax(scale * Q K^T [+ causal mask]) V and the
// log-sum-exp of every row. q is (B, Nq, Hq, D); k and v are (B, Nk, Hkv, D).
func Forward(q, k, v *Tensor, opts *Options) (*Result, error) {
	p, err := checkForward(q, k, v, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(p, opts, false)
	if err != nil {
		return nil, err
	}
	out := newOutput(p.QShape())
	lse := newBuffer(p.LSELen())
	if err := im.forward(p, q, k, v, opts, out, lse); err != nil {
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
	p, err := checkBackward(q, k, v, out, dOut, lse, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(p, opts, true)
	if err != nil {
		return nil, err
	}
	g := &Grads{DQ: newOutput(p.QShape()), DK: newOutput(p.KVShape()), DV: newOutput(p.KVShape()), Backend: be, Reason: reason}
	if err := im.backward(p, q, k, v, out, dOut, lse, opts, g.DQ, g.DK, g.DV); err != nil {
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
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"out", out}, {"dOut", dOut}} {
		if err := a.t.check(a.name); err != nil {
			return problem{}, err
		}
		if err := expectShape(a.name, a.t.Shape, d.QShape()); err != nil {
			return problem{}, err
		}
	}
	if err := d.checkLSE(lse); err != nil {
		return problem{}, err
	}
	return opts.resolve(d)
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

// pick resolves the backend for one call. Auto falls back to CPUFlash for
// any reason the GPU cannot run the problem, and says which.
func pick(p problem, o *Options, backward bool) (Backend, string, impl, error) {
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
		im, reason, err := gpuFor(p, o, backward)
		if err != nil {
			return GPU, "", nil, err
		}
		return GPU, reason, im, nil
	}
	im, reason, err := gpuFor(p, o, backward)
	if err == nil {
		return GPU, reason, im, nil
	}
	return CPUFlash, "GPU not used: " + err.Error(), flashImpl{}, nil
}
