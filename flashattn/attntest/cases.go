package attntest

import (
	"fmt"
	"math"

	"github.com/goflash/goflash/flashattn"
)

// Layout is how a case lays its inputs out in memory.
type Layout int

const (
	// Dense: contiguous BSHD.
	Dense Layout = iota
	// HeadMajor: BHSD order (heads outside rows), each row padded with NaNs
	// after its D values, so a backend that reads past D or assumes BSHD
	// strides produces NaNs or wrong values.
	HeadMajor
	// PackedQKV: q, k and v are views of one (B, N, Hq+2*Hkv, D) buffer, as
	// a fused QKV projection produces; needs Nq == Nk.
	PackedQKV
	// StridedD: the D stride is 2 and the gaps hold NaNs.
	StridedD
)

func (l Layout) String() string {
	return [...]string{"dense", "head-major", "packed-qkv", "strided-d"}[l]
}

// Case is one attention problem of the suite. Inputs are drawn from N(0, 1)
// with seeds derived from Seed.
type Case struct {
	Name                  string
	B, Nq, Nk, Hq, Hkv, D int
	Causal                bool
	Scale                 float64 // 0: 1/sqrt(D)
	Layout                Layout
	Seed                  uint64
	// Window, Softcap and ALiBi (slopes from ALiBiSlopes) modify the scores.
	Window  *flashattn.Window
	Softcap float64
	ALiBi   bool
}

// Mods reports whether the case modifies its scores beyond the causal
// mask (a window bounded within the keys, softcap or ALiBi): what a Backend
// with Plain refuses. A window side reaching past every key is unbounded,
// and Right 0 is the causal mask (Options.Window's rules).
func (c Case) Mods() bool { return c.windowHides() || c.Softcap != 0 || c.ALiBi }

// windowHides reports whether c's window is bounded within the keys on
// either side (Left < Nk, or 0 < Right < Nq): the calls then run a modified
// kernel.
func (c Case) windowHides() bool {
	w := c.Window
	return w != nil && (w.Left >= 0 && w.Left < c.Nk || w.Right > 0 && w.Right < c.Nq)
}

// ALiBiSlopes are the slopes of ALiBi (Press et al., 2022) for hq heads:
// the geometric sequence 2^(-8(h+1)/hq).
func ALiBiSlopes(hq int) []float64 {
	s := make([]float64, hq)
	for h := range s {
		s[h] = math.Exp2(-8 * float64(h+1) / float64(hq))
	}
	return s
}

// Cases is the suite's covering list. Not the full cross product: every
// value of every axis appears (N in 1, 17, 97, 1025 for both Nq and Nk;
// Nq > Nk and Nq < Nk; GQA groups 1, 2, 8; causal and not; D in 16, 32, 64,
// 80, 96, 128, 256), combined where the combination matters:
// causal with Nq > Nk (rows that see no key), N = 1025 (16 full 64-blocks and
// a ragged one) causal at a moderate D, sharp softmax (a scale that would
// overflow exp without the max subtracted), strided views, and an odd head
// dim (7) that only backends supporting every D accept. Then the score
// modifiers: sliding windows (each side alone, both, with causal, with
// Nq != Nk, with rows that see no key, a window of one key, windows narrower
// than a block so that whole blocks are skipped on both sides), softcap
// (with scores far beyond the cap), ALiBi, all of them at once, and pairs of
// them at the larger head dims (the GPU's modified kernels per tile).
func Cases() []Case {
	cs := []Case{
		{Name: "N1", B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: 16},
		{Name: "N1-causal-mqa", B: 2, Nq: 1, Nk: 1, Hq: 2, Hkv: 1, D: 32, Causal: true},
		{Name: "N17-causal", B: 1, Nq: 17, Nk: 17, Hq: 4, Hkv: 4, D: 64, Causal: true},
		{Name: "N97-gqa2", B: 2, Nq: 97, Nk: 97, Hq: 4, Hkv: 2, D: 80},
		{Name: "Nq97-Nk17-causal-gqa8", B: 1, Nq: 97, Nk: 17, Hq: 8, Hkv: 1, D: 96, Causal: true},
		{Name: "Nq17-Nk97-causal", B: 1, Nq: 17, Nk: 97, Hq: 2, Hkv: 2, D: 128, Causal: true},
		{Name: "Nq97-Nk1", B: 3, Nq: 97, Nk: 1, Hq: 2, Hkv: 2, D: 32},
		{Name: "Nq1-Nk1025-mqa", B: 1, Nq: 1, Nk: 1025, Hq: 2, Hkv: 1, D: 256},
		{Name: "N1025-causal-gqa2", B: 1, Nq: 1025, Nk: 1025, Hq: 2, Hkv: 1, D: 64, Causal: true},
		{Name: "Nq1025-Nk97-causal", B: 1, Nq: 1025, Nk: 97, Hq: 1, Hkv: 1, D: 16, Causal: true},
		{Name: "N97-causal-gqa8-D256", B: 1, Nq: 97, Nk: 97, Hq: 8, Hkv: 1, D: 256, Causal: true},
		{Name: "Nq17-Nk1-causal", B: 1, Nq: 17, Nk: 1, Hq: 2, Hkv: 2, D: 16, Causal: true},
		{Name: "Nq1-Nk17-causal-gqa2", B: 2, Nq: 1, Nk: 17, Hq: 4, Hkv: 2, D: 80, Causal: true},
		{Name: "sharp-scale4", B: 1, Nq: 97, Nk: 97, Hq: 1, Hkv: 1, D: 64, Scale: 4},
		{Name: "packed-qkv-causal-gqa2", B: 2, Nq: 33, Nk: 33, Hq: 4, Hkv: 2, D: 64, Causal: true, Layout: PackedQKV},
		{Name: "head-major-Nq65-Nk40", B: 2, Nq: 65, Nk: 40, Hq: 2, Hkv: 2, D: 32, Causal: true, Layout: HeadMajor},
		{Name: "strided-d-scale-0.3", B: 1, Nq: 20, Nk: 70, Hq: 2, Hkv: 1, D: 64, Scale: 0.3, Layout: StridedD},
		{Name: "odd-D7", B: 2, Nq: 33, Nk: 30, Hq: 3, Hkv: 1, D: 7, Causal: true},
		{Name: "window-l16-r8-N97", B: 1, Nq: 97, Nk: 97, Hq: 2, Hkv: 1, D: 32, Window: &flashattn.Window{Left: 16, Right: 8}},
		{Name: "window-l20-causal-gqa4-Nq65-Nk300", B: 2, Nq: 65, Nk: 300, Hq: 4, Hkv: 1, D: 64, Causal: true, Window: &flashattn.Window{Left: 20, Right: -1}},
		{Name: "window-r3-Nq97-Nk17", B: 1, Nq: 97, Nk: 17, Hq: 2, Hkv: 2, D: 16, Window: &flashattn.Window{Left: -1, Right: 3}},
		{Name: "window-l5-r0-Nq300-Nk130-gqa2", B: 1, Nq: 300, Nk: 130, Hq: 4, Hkv: 2, D: 32, Window: &flashattn.Window{Left: 5, Right: 0}},
		{Name: "window-l0-causal-N33", B: 1, Nq: 33, Nk: 33, Hq: 1, Hkv: 1, D: 16, Causal: true, Window: &flashattn.Window{Left: 0, Right: -1}},
		{Name: "window-l130-Nq17-Nk200-odd-D7", B: 2, Nq: 17, Nk: 200, Hq: 3, Hkv: 3, D: 7, Window: &flashattn.Window{Left: 130, Right: 2}, Layout: StridedD},
		// Reaches past every key ("no limit" as a huge number): the unbounded
		// window, not an index overflow or an int32 truncation (on 64-bit
		// ints MaxInt-3 narrows to -4).
		{Name: "window-maxint-Nq40-Nk70", B: 1, Nq: 40, Nk: 70, Hq: 2, Hkv: 1, D: 64, Window: &flashattn.Window{Left: math.MaxInt, Right: math.MaxInt}},
		{Name: "window-lmaxint-3-r3-Nq70-Nk40", B: 1, Nq: 70, Nk: 40, Hq: 2, Hkv: 2, D: 64, Window: &flashattn.Window{Left: math.MaxInt - 3, Right: 3}},
		{Name: "softcap5-scale1-Nq97-Nk70", B: 1, Nq: 97, Nk: 70, Hq: 2, Hkv: 2, D: 64, Scale: 1, Softcap: 5},
		{Name: "softcap30-causal-gqa2-Nq17-Nk97", B: 2, Nq: 17, Nk: 97, Hq: 4, Hkv: 2, D: 80, Causal: true, Softcap: 30},
		{Name: "alibi-N97-gqa4", B: 1, Nq: 97, Nk: 97, Hq: 8, Hkv: 2, D: 32, ALiBi: true},
		{Name: "alibi-causal-Nq97-Nk33", B: 1, Nq: 97, Nk: 33, Hq: 2, Hkv: 1, D: 64, Causal: true, ALiBi: true, Layout: HeadMajor},
		{Name: "all-window-softcap-alibi-causal-gqa2", B: 2, Nq: 130, Nk: 150, Hq: 4, Hkv: 2, D: 32, Causal: true,
			Window: &flashattn.Window{Left: 40, Right: -1}, Softcap: 8, Scale: 0.5, ALiBi: true},
		// The GPU's modified forward at the head dims above do not reach (D 96, 128, 256).
		{Name: "window-l100-r20-softcap20-N300-D128", B: 1, Nq: 300, Nk: 300, Hq: 2, Hkv: 1, D: 128,
			Window: &flashattn.Window{Left: 100, Right: 20}, Softcap: 20},
		{Name: "alibi-window-l70-causal-Nq150-Nk200-D96", B: 1, Nq: 150, Nk: 200, Hq: 2, Hkv: 2, D: 96, Causal: true,
			Window: &flashattn.Window{Left: 70, Right: -1}, ALiBi: true},
		{Name: "alibi-softcap10-N130-D256", B: 1, Nq: 130, Nk: 130, Hq: 2, Hkv: 1, D: 256, Softcap: 10, ALiBi: true},
		// Gemma 2's sliding window and softcap at D 256, Nq != Nk, GQA: query
		// blocks whose first visible key block is not the first (the GPU's
		// ordered modified single pass starts their dQ additions there).
		{Name: "window-l100-causal-softcap30-Nq200-Nk333-gqa2-D256", B: 1, Nq: 200, Nk: 333, Hq: 4, Hkv: 2, D: 256, Causal: true,
			Window: &flashattn.Window{Left: 100, Right: -1}, Softcap: 30},
		// Several key blocks on each side of the diagonal per row block (the GPU's
		// ALiBi column-bias form, its running max moved between the sides).
		{Name: "alibi-Nq300-Nk520-gqa2", B: 1, Nq: 300, Nk: 520, Hq: 4, Hkv: 2, D: 64, ALiBi: true},
		{Name: "alibi-causal-N400-D128", B: 1, Nq: 400, Nk: 400, Hq: 2, Hkv: 2, D: 128, Causal: true, ALiBi: true},
		// Runs of key blocks wholly inside every row's window between masked
		// ones on both sides (the GPU's modified kernels take such runs in a
		// loop of their own at D <= 64 and on Turing): a sliding window with
		// the softcap, the softcap with ALiBi over whole rows, and a long
		// causal window.
		{Name: "window-l300-r40-softcap15-N800", B: 1, Nq: 800, Nk: 800, Hq: 2, Hkv: 1, D: 64,
			Window: &flashattn.Window{Left: 300, Right: 40}, Softcap: 15},
		{Name: "softcap12-alibi-Nq600-Nk700-gqa2", B: 1, Nq: 600, Nk: 700, Hq: 4, Hkv: 2, D: 32, Softcap: 12, ALiBi: true},
		{Name: "window-l450-causal-N700-gqa2", B: 1, Nq: 700, Nk: 700, Hq: 2, Hkv: 1, D: 64, Causal: true,
			Window: &flashattn.Window{Left: 450, Right: -1}},
	}
	for i := range cs {
		cs[i].Seed = uint64(1000 * (i + 1))
	}
	return cs
}

// CasesAt is Cases at head dim d: every case whose D is not d, with D set
// to d and "-at-D<d>" after its name (the cases already at d are Cases'
// own). A backend whose kernels at d differ from those at its other head
// dims (the Turing path's D 256 row) runs the whole covering list there.
func CasesAt(d int) []Case { return atHeadDim(Cases(), d, func(c *Case) *Case { return c }) }

// atHeadDim is the elements of cs whose case (caseOf) is not at head dim d,
// moved there and renamed as CasesAt says.
func atHeadDim[T any](cs []T, d int, caseOf func(*T) *Case) []T {
	var out []T
	for _, x := range cs {
		if c := caseOf(&x); c.D != d {
			c.D = d
			c.Name += fmt.Sprintf("-at-D%d", d)
			out = append(out, x)
		}
	}
	return out
}

func (c Case) String() string {
	s := fmt.Sprintf("%s B=%d Nq=%d Nk=%d Hq=%d Hkv=%d D=%d causal=%v scale=%g %v",
		c.Name, c.B, c.Nq, c.Nk, c.Hq, c.Hkv, c.D, c.Causal, c.Scale, c.Layout)
	if c.Window != nil {
		s += fmt.Sprintf(" window=[%d,%d]", c.Window.Left, c.Window.Right)
	}
	if c.Softcap != 0 {
		s += fmt.Sprintf(" softcap=%g", c.Softcap)
	}
	if c.ALiBi {
		s += " alibi"
	}
	return s
}

// Dims is the case's problem size.
func (c Case) Dims() flashattn.Dims {
	return flashattn.Dims{B: c.B, Nq: c.Nq, Nk: c.Nk, Hq: c.Hq, Hkv: c.Hkv, D: c.D}
}

// Options are the options the case passes (the Backend field is the
// backend's to set).
func (c Case) Options() *flashattn.Options {
	o := &flashattn.Options{Causal: c.Causal, Scale: c.Scale, Softcap: c.Softcap}
	if c.Window != nil {
		w := *c.Window
		o.Window = &w
	}
	if c.ALiBi {
		o.ALiBi = ALiBiSlopes(c.Hq)
	}
	return o
}

// EffectiveScale is the softmax scale the case asks for: Scale, or 1/sqrt(D).
func (c Case) EffectiveScale() float64 {
	if c.Scale != 0 {
		return c.Scale
	}
	return 1 / math.Sqrt(float64(c.D))
}

// Inputs builds q, k, v and dOut in the case's layout, with the same values
// whatever the layout. It fails only for a case that cannot be laid out
// (PackedQKV with Nq != Nk).
func (c Case) Inputs() (q, k, v, dOut *flashattn.Tensor, err error) {
	d := c.Dims()
	qs, kvs := d.QShape(), d.KVShape()
	vals := []*flashattn.Tensor{
		flashattn.Random(qs, c.Seed), flashattn.Random(kvs, c.Seed+1),
		flashattn.Random(kvs, c.Seed+2), flashattn.Random(qs, c.Seed+3),
	}
	var ts [4]*flashattn.Tensor
	switch c.Layout {
	case Dense:
		copy(ts[:], vals)
	case PackedQKV:
		if c.Nq != c.Nk {
			return nil, nil, nil, nil, fmt.Errorf("attntest: case %s: PackedQKV needs Nq == Nk", c.Name)
		}
		w := (c.Hq + 2*c.Hkv) * c.D // one token's q, k and v
		buf := make([]float32, c.B*c.Nq*w)
		st := flashattn.Strides{c.Nq * w, w, c.D, 1}
		ts[0] = &flashattn.Tensor{Shape: qs, Strides: st, Data: buf}
		ts[1] = &flashattn.Tensor{Shape: kvs, Strides: st, Data: buf[c.Hq*c.D:]}
		ts[2] = &flashattn.Tensor{Shape: kvs, Strides: st, Data: buf[(c.Hq+c.Hkv)*c.D:]}
		ts[3] = vals[3]
	case HeadMajor:
		for i, val := range vals {
			s := val.Shape
			pad := s.D + 5 // row pitch: D values, then 5 NaNs
			ts[i] = nanTensor(s, flashattn.Strides{s.H * s.N * pad, pad, s.N * pad, 1}, s.B*s.H*s.N*pad)
		}
	case StridedD:
		for i, val := range vals {
			s := val.Shape
			ts[i] = nanTensor(s, flashattn.Strides{s.N * s.H * s.D * 2, s.H * s.D * 2, s.D * 2, 2}, 2*s.Numel())
		}
	}
	for i, val := range vals {
		if ts[i] == val {
			continue
		}
		s := val.Shape
		for b := 0; b < s.B; b++ {
			for n := 0; n < s.N; n++ {
				for h := 0; h < s.H; h++ {
					for x := 0; x < s.D; x++ {
						ts[i].Set(b, n, h, x, val.At(b, n, h, x))
					}
				}
			}
		}
	}
	return ts[0], ts[1], ts[2], ts[3], nil
}

func nanTensor(s flashattn.Shape, st flashattn.Strides, n int) *flashattn.Tensor {
	buf := make([]float32, n)
	for i := range buf {
		buf[i] = float32(math.NaN())
	}
	return &flashattn.Tensor{Shape: s, Strides: st, Data: buf}
}
