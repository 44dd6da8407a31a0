package flashattn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Tensor is a float32 tensor in BSHD layout (batch, sequence, heads, head
// dim) with explicit element strides, so views of a larger buffer (for
// example a packed QKV projection) can be passed without copying.
type Tensor struct {
	Shape   Shape
	Strides Strides
	Data    []float32
}

// Make returns a dense zero tensor of shape s, or the error that says why
// there is none: a *ShapeError for a dimension below 1, a *DataError for a
// shape whose size overflows, a *MemoryError for one beyond HostMemoryLimit.
func Make(s Shape) (*Tensor, error) {
	if err := checkShape("tensor", s); err != nil {
		return nil, err
	}
	if err := reserve(fmt.Sprintf("tensor %v", s), floats(s.Numel())); err != nil {
		return nil, err
	}
	return &Tensor{Shape: s, Strides: s.ContiguousStrides(), Data: make([]float32, s.Numel())}, nil
}

// New returns a dense zero tensor of shape s. For a shape Make refuses it
// allocates nothing and returns a tensor with nil Data, which every function
// of the package refuses with Make's typed error (a *ShapeError, a
// *DataError, a *MemoryError for a shape too large for this machine), and
// whose methods hold nothing: At reads 0, Set and Fill write nothing, Row
// is nil. New never panics; Make says why at once.
func New(s Shape) *Tensor {
	t, err := Make(s)
	if err != nil {
		return &Tensor{Shape: s}
	}
	return t
}

// FromSlice wraps data (not copied) as a dense BSHD tensor of shape s.
func FromSlice(s Shape, data []float32) (*Tensor, error) {
	return FromStrided(s, s.ContiguousStrides(), data)
}

// FromStrided wraps data (not copied) as a BSHD tensor with the given
// element strides. It checks that every element the shape reaches lies inside
// data.
func FromStrided(s Shape, st Strides, data []float32) (*Tensor, error) {
	t := &Tensor{Shape: s, Strides: st, Data: data}
	if err := t.check("tensor"); err != nil {
		return nil, err
	}
	return t, nil
}

// Random returns a dense tensor of shape s with values drawn from a normal
// distribution N(0, 1), reproducible from seed; a shape Make refuses gives
// a tensor with nil Data, as New.
func Random(s Shape, seed uint64) *Tensor {
	t := New(s)
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// Offset is the position of element (b, n, h, d) in Data, from the strides
// alone: it does not check the indices against the shape or Data (At, Set
// and Row do). A nil *Tensor has no positions: -1.
func (t *Tensor) Offset(b, n, h, d int) int {
	if t == nil {
		return -1
	}
	return b*t.Strides[0] + n*t.Strides[1] + h*t.Strides[2] + d*t.Strides[3]
}

// elem is Offset of an element inside the shape whose position lies in
// Data; ok is false for any other (and for a nil *Tensor).
func (t *Tensor) elem(b, n, h, d int) (o int, ok bool) {
	if t == nil {
		return 0, false
	}
	s := t.Shape
	if b < 0 || n < 0 || h < 0 || d < 0 || b >= s.B || n >= s.N || h >= s.H || d >= s.D {
		return 0, false
	}
	// Offset's sum, refused where a product or the sum leaves int: a
	// wrapped offset could land inside Data.
	for i, x := range [4]int{b, n, h, d} {
		st := t.Strides[i]
		if x != 0 && (st > math.MaxInt/x || st < math.MinInt/x) {
			return 0, false
		}
		p := x * st
		if p > 0 && o > math.MaxInt-p || p < 0 && o < math.MinInt-p {
			return 0, false
		}
		o += p
	}
	return o, o >= 0 && o < len(t.Data)
}

// At returns element (b, n, h, d); 0 for an index outside the shape or a
// position outside Data (a nil *Tensor, New's tensor of a refused shape).
func (t *Tensor) At(b, n, h, d int) float32 {
	o, ok := t.elem(b, n, h, d)
	if !ok {
		return 0
	}
	return t.Data[o]
}

// Set sets element (b, n, h, d); it writes nothing for an index outside
// the shape or a position outside Data.
func (t *Tensor) Set(b, n, h, d int, x float32) {
	if o, ok := t.elem(b, n, h, d); ok {
		t.Data[o] = x
	}
}

// Row returns the D values of row n of head h of batch b. When the D stride
// is 1 it is a view into Data, otherwise a copy. It is nil for an index
// outside the shape or a row that Data does not hold whole.
func (t *Tensor) Row(b, n, h int) []float32 {
	if t == nil {
		return nil
	}
	o, ok := t.elem(b, n, h, 0)
	if _, okLast := t.elem(b, n, h, t.Shape.D-1); !ok || !okLast {
		return nil
	}
	if t.Strides[3] == 1 {
		return t.Data[o : o+t.Shape.D : o+t.Shape.D]
	}
	r := make([]float32, t.Shape.D)
	for d := range r {
		r[d] = t.Data[o+d*t.Strides[3]]
	}
	return r
}

// rowInto copies the D values of row n of head h of batch b into dst
// without allocating (Row allocates when the D stride is not 1).
func (t *Tensor) rowInto(dst []float32, b, n, h int) {
	o, sd := t.Offset(b, n, h, 0), t.Strides[3]
	if sd == 1 {
		copy(dst[:t.Shape.D], t.Data[o:o+t.Shape.D])
		return
	}
	for d := range dst[:t.Shape.D] {
		dst[d] = t.Data[o+d*sd]
	}
}

// IsContiguous reports whether t is a dense BSHD tensor (false for a nil
// *Tensor).
func (t *Tensor) IsContiguous() bool {
	return t != nil && t.Strides == t.Shape.ContiguousStrides()
}

// Contiguous returns t if it is dense, else a dense copy. A tensor the
// package refuses (nil or short Data, as New gives for a shape too large)
// or a copy too large for this machine gives a tensor with nil Data, which
// every function refuses with a typed error: Contiguous never panics.
func (t *Tensor) Contiguous() *Tensor {
	if t == nil {
		return nil
	}
	if t.check("tensor") != nil {
		return &Tensor{Shape: t.Shape}
	}
	if t.IsContiguous() && len(t.Data) == t.Shape.Numel() {
		return t
	}
	c := New(t.Shape)
	if c.Data == nil {
		return c
	}
	s := t.Shape
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				for d := 0; d < s.D; d++ {
					c.Set(b, n, h, d, t.At(b, n, h, d))
				}
			}
		}
	}
	return c
}

// Clone returns a dense copy of t (a tensor with nil Data where Contiguous
// gives one).
func (t *Tensor) Clone() *Tensor {
	if t == nil {
		return nil
	}
	c := t.Contiguous()
	if c == t {
		c = &Tensor{Shape: t.Shape, Strides: t.Strides, Data: append([]float32(nil), t.Data...)}
	}
	return c
}

// Fill sets every element reachable through the shape to x; a tensor the
// package refuses (nil or short Data) is left as it is.
func (t *Tensor) Fill(x float32) {
	if t.check("tensor") != nil {
		return
	}
	s := t.Shape
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				for d := 0; d < s.D; d++ {
					t.Set(b, n, h, d, x)
				}
			}
		}
	}
}

// maxElements bounds the elements one tensor may have or reach (2^37, 512 GiB
// of float32): far beyond any real problem, small enough that no offset or
// size computation overflows int.
const maxElements = float64(1 << 37)

// checkShape validates a shape on its own: every dimension positive, and
// few enough elements that no size computation overflows.
func checkShape(arg string, s Shape) error {
	dims := [4]int{s.B, s.N, s.H, s.D}
	n := 1.0 // in float64, so absurd shapes cannot overflow (Numel itself could)
	for i, name := range [4]string{"B", "N", "H", "D"} {
		if dims[i] < 1 {
			return &ShapeError{Arg: arg, Dim: name, Got: dims[i], Want: ">= 1"}
		}
		n *= float64(dims[i])
	}
	if n >= maxElements {
		return &DataError{Arg: arg, Reason: fmt.Sprintf("shape %v is too large", s)}
	}
	return nil
}

// check validates shape, strides and data length without panicking.
func (t *Tensor) check(arg string) error {
	if t == nil {
		return &DataError{Arg: arg, Reason: "tensor is nil"}
	}
	s := t.Shape
	if err := checkShape(arg, s); err != nil {
		return err
	}
	dims := [4]int{s.B, s.N, s.H, s.D}
	for i, name := range [4]string{"B", "N", "H", "D"} { // after the shape: strides derived from a bad shape are bad too
		if t.Strides[i] < 0 {
			return &DataError{Arg: arg, Reason: fmt.Sprintf("stride of %s is %d, want >= 0", name, t.Strides[i])}
		}
	}
	// The largest offset must fit in int: computed in float64 first.
	far := 0.0
	for i := range dims {
		far += float64(dims[i]-1) * float64(t.Strides[i])
	}
	if far >= maxElements {
		return &DataError{Arg: arg, Reason: fmt.Sprintf("shape %v is too large", s)}
	}
	need := t.Offset(s.B-1, s.N-1, s.H-1, s.D-1) + 1
	if t.Data == nil {
		// What New and Random return for a shape too large for this machine.
		if err := reserve(fmt.Sprintf("%s %v", arg, s), floats(s.Numel())); err != nil {
			return err
		}
		return &DataError{Arg: arg, Len: 0, Need: need, Reason: "data is nil"}
	}
	if len(t.Data) < need {
		return &DataError{Arg: arg, Len: len(t.Data), Need: need}
	}
	return nil
}
