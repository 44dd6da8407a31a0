package flashattn

import (
	"fmt"
	"math"
)

// Shape is the shape of one BSHD tensor: batch, sequence length, heads, head
// dimension.
type Shape struct {
	B, N, H, D int
}

// Numel is the number of elements of a tensor of this shape.
func (s Shape) Numel() int { return s.B * s.N * s.H * s.D }

// Strides are the element strides of the B, N, H and D dimensions.
type Strides [4]int

// ContiguousStrides returns the strides of a dense BSHD tensor of shape s.
func (s Shape) ContiguousStrides() Strides {
	return Strides{s.N * s.H * s.D, s.H * s.D, s.D, 1}
}

func (s Shape) String() string { return fmt.Sprintf("[B=%d N=%d H=%d D=%d]", s.B, s.N, s.H, s.D) }

// Dims describes one attention problem. Every buffer size in the library is
// derived from it, never computed by hand.
//
//	q, out, dOut, dQ : (B, Nq, Hq, D)
//	k, v, dK, dV     : (B, Nk, Hkv, D)
//	lse              : (B, Hq, Nq), float32, natural logarithm
//
// Hq must be a multiple of Hkv (GQA; Hkv == 1 is MQA): query head h reads
// key/value head h / (Hq/Hkv).
type Dims struct {
	B, Nq, Nk, Hq, Hkv, D int
}

// QShape is the shape of q, out, dOut and dQ.
func (d Dims) QShape() Shape { return Shape{d.B, d.Nq, d.Hq, d.D} }

// KVShape is the shape of k, v, dK and dV.
func (d Dims) KVShape() Shape { return Shape{d.B, d.Nk, d.Hkv, d.D} }

// LSELen is the number of float32 values in the log-sum-exp buffer.
func (d Dims) LSELen() int { return d.B * d.Hq * d.Nq }

// LSEIndex is the position of row i of query head h of batch b in the LSE buffer.
func (d Dims) LSEIndex(b, h, i int) int { return (b*d.Hq+h)*d.Nq + i }

// Groups is the number of query heads that share one key/value head: 0
// for dims without a key/value head or with fewer query heads (Hkv < 1 or
// Hq < Hkv), which Validate refuses.
func (d Dims) Groups() int {
	if d.Hkv < 1 {
		return 0
	}
	return d.Hq / d.Hkv
}

// KVHead is the key/value head read by query head h: -1 (none) where
// Groups is 0.
func (d Dims) KVHead(h int) int {
	g := d.Groups()
	if g < 1 {
		return -1
	}
	return h / g
}

// CausalOffset is added to a query row index before comparing it with a key
// index: row i may attend to key j iff j <= i + Nk - Nq (bottom-right aligned
// causal mask, as FlashAttention-2 since 2.1). Rows with i + Nk - Nq < 0 see no
// key at all; their output is 0 and their LSE is -Inf.
func (d Dims) CausalOffset() int { return d.Nk - d.Nq }

// FLOPs is the forward pass's floating-point operation count by the FA2
// paper's convention: 4*B*Hq*Nq*Nk*D, halved when causal.
func (d Dims) FLOPs(causal bool) float64 {
	f := 4 * float64(d.B) * float64(d.Hq) * float64(d.Nq) * float64(d.Nk) * float64(d.D)
	if causal {
		f /= 2
	}
	return f
}

// BackwardFLOPs is the backward pass's count by the FA2 paper's convention:
// 2.5 times the forward's (five matrix products to the forward's two).
func (d Dims) BackwardFLOPs(causal bool) float64 { return 2.5 * d.FLOPs(causal) }

// Validate checks that every dimension is positive and Hq is a multiple of Hkv.
func (d Dims) Validate() error {
	for _, c := range []struct {
		arg, dim string
		v        int
	}{{"q", "B", d.B}, {"q", "N", d.Nq}, {"k", "N", d.Nk}, {"q", "H", d.Hq}, {"k", "H", d.Hkv}, {"q", "D", d.D}} {
		if c.v < 1 {
			return &ShapeError{Arg: c.arg, Dim: c.dim, Got: c.v, Want: ">= 1"}
		}
	}
	if d.Hq%d.Hkv != 0 {
		return &ShapeError{Arg: "q", Dim: "H", Got: d.Hq, Want: fmt.Sprintf("a multiple of k's H (%d)", d.Hkv)}
	}
	return nil
}

// DimsOf reads the problem's dimensions from q, k and v and checks that they
// agree with each other.
func DimsOf(q, k, v *Tensor) (Dims, error) {
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := a.t.check(a.name); err != nil {
			return Dims{}, err
		}
	}
	return dimsOf(q.Shape, k.Shape, v.Shape)
}

// dimsOf is DimsOf for shapes alone (device tensors have no strides).
func dimsOf(q, k, v Shape) (Dims, error) {
	for _, a := range []struct {
		name string
		s    Shape
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := checkShape(a.name, a.s); err != nil {
			return Dims{}, err
		}
	}
	d := Dims{B: q.B, Nq: q.N, Nk: k.N, Hq: q.H, Hkv: k.H, D: q.D}
	if err := d.Validate(); err != nil {
		return Dims{}, err
	}
	if err := expectShape("k", k, d.KVShape()); err != nil {
		return Dims{}, err
	}
	if err := expectShape("v", v, d.KVShape()); err != nil {
		return Dims{}, err
	}
	return d, nil
}

// checkLSE checks a log-sum-exp buffer given to a backward pass: exactly
// LSELen values, each finite or -Inf (a row that sees no key). It returns
// the largest row index i (over all batches and heads) whose LSE is -Inf,
// or -1: which rows may be -Inf depends on the mask (problem.checkLSE).
func (d Dims) checkLSE(lse []float32) (lastNoKey int, err error) {
	if len(lse) != d.LSELen() {
		return 0, &DataError{Arg: "lse", Len: len(lse), Need: d.LSELen(),
			Reason: fmt.Sprintf("has %d values, B*Hq*Nq = %d wanted", len(lse), d.LSELen())}
	}
	lastNoKey = -1
	for i, x := range lse {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return 0, &DataError{Arg: "lse", Reason: fmt.Sprintf("element %d is %v (want finite or -Inf)", i, x)}
		}
		if math.IsInf(float64(x), -1) {
			lastNoKey = max(lastNoKey, i%d.Nq)
		}
	}
	return lastNoKey, nil
}

func expectShape(arg string, got, want Shape) error {
	g := [4]int{got.B, got.N, got.H, got.D}
	w := [4]int{want.B, want.N, want.H, want.D}
	for i, name := range [4]string{"B", "N", "H", "D"} {
		if g[i] != w[i] {
			return &ShapeError{Arg: arg, Dim: name, Got: g[i], Want: fmt.Sprintf("== %d", w[i])}
		}
	}
	return nil
}
