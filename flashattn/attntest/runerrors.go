package attntest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

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
		{"window-below-minus-1", fwd(q, k, v, &flashattn.Options{Window: &flashattn.Window{Left: -2, Right: 1}}), option("Window")},
		{"window-right-with-causal", fwd(q, k, v, &flashattn.Options{Causal: true, Window: &flashattn.Window{Left: 2, Right: 1}}), option("Window")},
		{"negative-softcap", fwd(q, k, v, &flashattn.Options{Softcap: -3}), option("Softcap")},
		{"NaN-softcap", fwd(q, k, v, &flashattn.Options{Softcap: math.NaN()}), option("Softcap")},
		{"alibi-one-per-kv-head", fwd(q, k, v, &flashattn.Options{ALiBi: ALiBiSlopes(d.Hkv)}), option("ALiBi")},
		{"alibi-NaN", fwd(q, k, v, &flashattn.Options{ALiBi: []float64{1, 1, math.NaN(), 1}}), option("ALiBi")},
		{"backward-alibi-length", bwd(out, dO, lse, &flashattn.Options{ALiBi: ALiBiSlopes(d.Hq + 1)}), option("ALiBi")},
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
