package flashattn

import (
	"errors"
	"fmt"
	"math"
)

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

// impl is one backend. Inputs are validated before it is called; out, lse
// and the gradients are dense and sized from d.
type impl interface {
	forward(d Dims, q, k, v *Tensor, scale float64, o *Options, out *Tensor, lse []float32) error
	backward(d Dims, q, k, v, out, dOut *Tensor, lse []float32, scale float64, o *Options, dq, dk, dv *Tensor) error
}

// Forward computes softmax(scale * Q K^T [+ causal mask]) V and the
// log-sum-exp of every row. q is (B, Nq, Hq, D); k and v are (B, Nk, Hkv, D).
func Forward(q, k, v *Tensor, opts *Options) (*Result, error) {
	d, err := DimsOf(q, k, v)
	if err != nil {
		return nil, err
	}
	if err := opts.check(d); err != nil {
		return nil, err
	}
	scale, _ := opts.scale(d.D)
	be, reason, im, err := pick(d, opts, false)
	if err != nil {
		return nil, err
	}
	out := newOutput(d.QShape())
	lse := newBuffer(d.LSELen())
	if err := im.forward(d, q, k, v, scale, opts, out, lse); err != nil {
		return nil, err
	}
	return &Result{Dims: d, Out: out, LSE: lse, Backend: be, Reason: reason}, nil
}

// Backward computes dQ, dK and dV of Forward's output given dOut, from the
// inputs, the output and the LSE of the forward pass (FA2 recomputes P from
// the LSE instead of storing it).
func Backward(q, k, v, out, dOut *Tensor, lse []float32, opts *Options) (*Grads, error) {
	d, err := DimsOf(q, k, v)
	if err != nil {
		return nil, err
	}
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"out", out}, {"dOut", dOut}} {
		if err := a.t.check(a.name); err != nil {
			return nil, err
		}
		if err := expectShape(a.name, a.t.Shape, d.QShape()); err != nil {
			return nil, err
		}
	}
	if lse == nil || len(lse) < d.LSELen() {
		return nil, &DataError{Arg: "lse", Len: len(lse), Need: d.LSELen()}
	}
	for i, x := range lse[:d.LSELen()] {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, &DataError{Arg: "lse", Reason: fmt.Sprintf("element %d is %v (want finite or -Inf)", i, x)}
		}
	}
	if err := opts.check(d); err != nil {
		return nil, err
	}
	scale, _ := opts.scale(d.D)
	be, reason, im, err := pick(d, opts, true)
	if err != nil {
		return nil, err
	}
	g := &Grads{DQ: newOutput(d.QShape()), DK: newOutput(d.KVShape()), DV: newOutput(d.KVShape()), Backend: be, Reason: reason}
	if err := im.backward(d, q, k, v, out, dOut, lse, scale, opts, g.DQ, g.DK, g.DV); err != nil {
		return nil, err
	}
	return g, nil
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

// pick resolves the backend for one call.
func pick(d Dims, o *Options, backward bool) (Backend, string, impl, error) {
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
		im, reason, err := gpuFor(d, o, backward)
		if err != nil {
			return GPU, "", nil, err
		}
		return GPU, reason, im, nil
	}
	im, reason, err := gpuFor(d, o, backward)
	if err == nil {
		return GPU, reason, im, nil
	}
	why := err.Error()
	var ue *UnsupportedError
	if errors.As(err, &ue) || errors.Is(err, ErrNoGPU) {
		why = err.Error()
	}
	return CPUFlash, "GPU not used: " + why, flashImpl{}, nil
}
