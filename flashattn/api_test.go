package flashattn

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Every test of this package runs with Forward and Backward filling their
// output buffers with NaN first, so an element a backend never writes fails
// the conformance suite's finiteness checks.
func init() { poisonOutputs = true }

func TestParseBackend(t *testing.T) {
	for _, b := range []Backend{Auto, CPUNaive, CPUFlash, GPU} {
		got, err := ParseBackend(b.String())
		if err != nil || got != b {
			t.Errorf("ParseBackend(%q) = %v, %v", b.String(), got, err)
		}
	}
	var oe *OptionError
	if _, err := ParseBackend("tpu"); !errors.As(err, &oe) || oe.Option != "Backend" {
		t.Errorf("ParseBackend(tpu): %v, want *OptionError", err)
	}
	if s := Backend(9).String(); s != "backend(9)" {
		t.Errorf("Backend(9).String() = %q", s)
	}
}

func TestDims(t *testing.T) {
	d := Dims{B: 2, Nq: 5, Nk: 7, Hq: 8, Hkv: 2, D: 16}
	if d.Groups() != 4 || d.KVHead(7) != 1 || d.KVHead(3) != 0 || d.CausalOffset() != 2 {
		t.Errorf("Groups %d KVHead(7) %d KVHead(3) %d CausalOffset %d", d.Groups(), d.KVHead(7), d.KVHead(3), d.CausalOffset())
	}
	if d.LSELen() != 2*8*5 || d.LSEIndex(1, 2, 3) != (1*8+2)*5+3 {
		t.Errorf("LSELen %d LSEIndex %d", d.LSELen(), d.LSEIndex(1, 2, 3))
	}
	if f := d.FLOPs(true); f != 4*2*8*5*7*16/2 {
		t.Errorf("FLOPs(causal) = %v", f)
	}
	if f := d.BackwardFLOPs(false); f != 2.5*4*2*8*5*7*16 {
		t.Errorf("BackwardFLOPs = %v", f)
	}
}

func TestTensorChecks(t *testing.T) {
	s := Shape{B: 2, N: 3, H: 4, D: 5}
	var de *DataError
	if _, err := FromSlice(s, make([]float32, s.Numel()-1)); !errors.As(err, &de) || de.Need != s.Numel() {
		t.Errorf("short slice: %v", err)
	}
	if _, err := FromStrided(s, Strides{60, 20, 5, -1}, make([]float32, 200)); !errors.As(err, &de) {
		t.Errorf("negative stride: %v", err)
	}
	var se *ShapeError
	if _, err := FromSlice(Shape{B: 1, N: -1, H: 1, D: 1}, nil); !errors.As(err, &se) || se.Dim != "N" {
		t.Errorf("negative N: %v", err)
	}
	// Sizes whose element count overflows int must be refused, not wrap
	// around (zero strides make a tiny buffer reach any shape).
	huge := Shape{B: 1 << 20, N: 1 << 20, H: 1 << 20, D: 1 << 20}
	if _, err := FromStrided(huge, Strides{}, make([]float32, 1)); !errors.As(err, &de) || !strings.Contains(err.Error(), "too large") {
		t.Errorf("huge broadcast shape: %v", err)
	}
	if _, err := FromSlice(huge, make([]float32, 1)); !errors.As(err, &de) {
		t.Errorf("huge dense shape: %v", err)
	}
	// Views: a head-major (BHSD) tensor read through strides.
	data := make([]float32, s.Numel())
	for i := range data {
		data[i] = float32(i)
	}
	hm, err := FromStrided(s, Strides{s.H * s.N * s.D, s.D, s.N * s.D, 1}, data)
	if err != nil {
		t.Fatal(err)
	}
	c := hm.Contiguous()
	if !c.IsContiguous() || c.At(1, 2, 3, 4) != hm.At(1, 2, 3, 4) || c.At(1, 2, 3, 4) != float32(((1*4+3)*3+2)*5+4) {
		t.Errorf("Contiguous: %v vs %v", c.At(1, 2, 3, 4), hm.At(1, 2, 3, 4))
	}
	cl := c.Clone()
	cl.Fill(7)
	if c.At(0, 0, 0, 1) == 7 || cl.At(1, 2, 3, 4) != 7 {
		t.Error("Clone shares data or Fill missed an element")
	}
	sd, _ := FromStrided(Shape{B: 1, N: 1, H: 1, D: 3}, Strides{6, 6, 6, 2}, []float32{1, 0, 2, 0, 3, 0})
	if r := sd.Row(0, 0, 0); r[0] != 1 || r[1] != 2 || r[2] != 3 {
		t.Errorf("Row with D stride 2 = %v", r)
	}
	// Accessors on a Tensor built by hand, whose strides' offsets leave int:
	// a wrapped offset is outside Data, not an element of it.
	for _, c := range []struct {
		st   Strides
		b, n int
	}{
		{Strides{0, 1 << 62, 0, 1}, 0, 4},               // 4·2^62 wraps to 0
		{Strides{math.MaxInt, 0, 0, 1}, 2, 0},           // a product past MaxInt
		{Strides{1 << 62, 1 << 62, 0, 1}, 1, 3},         // a sum past MaxInt
		{Strides{math.MinInt, math.MinInt, 0, 1}, 1, 1}, // a sum past MinInt
	} {
		data := []float32{1, 2, 3, 4, 5}
		wt := &Tensor{Shape: Shape{B: 3, N: 5, H: 1, D: 5}, Strides: c.st, Data: data}
		wt.Set(c.b, c.n, 0, 0, 42)
		if got := wt.At(c.b, c.n, 0, 0); got != 0 || data[0] != 1 {
			t.Errorf("strides %v: At = %v, data %v; want 0 and Data untouched", c.st, got, data)
		}
		if r := wt.Row(c.b, c.n, 0); r != nil {
			t.Errorf("strides %v: Row = %v, want nil", c.st, r)
		}
	}
	wide := &Tensor{Shape: Shape{B: 1, N: 1, H: 1, D: 5}, Strides: Strides{0, 0, 0, 1 << 62}, Data: []float32{7}}
	if r := wide.Row(0, 0, 0); r != nil { // its first and last offsets wrap to 0; the middle ones do not
		t.Errorf("Row with D stride 2^62 = %v, want nil", r)
	}
}

func TestOptionErrors(t *testing.T) {
	d := Dims{B: 1, Nq: 4, Nk: 4, Hq: 2, Hkv: 1, D: 8}
	q, k, v := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3)
	for _, c := range []struct {
		o      Options
		option string
	}{
		{Options{BlockQ: -1}, "BlockQ/BlockK"},
		{Options{Workers: -2}, "Workers"},
		{Options{Backend: Backend(7)}, "Backend"},
		{Options{Trace: &Trace{Head: 2}}, "Trace"},
		{Options{Trace: &Trace{Row: 4}}, "Trace"},
		{Options{Scale: -math.MaxFloat64}, "Scale"},
		{Options{Scale: -0.5}, "Scale"}, // the GPU kernels mask with -Inf before scaling
		{Options{Scale: math.NaN()}, "Scale"},
		{Options{Scale: math.Inf(1)}, "Scale"},
		{Options{Scale: 1e39}, "Scale"}, // beyond float32
		{Options{Device: -1}, "Device"}, // Auto refuses it, not falling back to the CPU silently
		{Options{Device: -1, Backend: CPUFlash}, "Device"},
		{Options{Backend: CPUNaive, Trace: &Trace{}}, "Trace"}, // refused, not left empty silently
		{Options{Backend: GPU, Trace: &Trace{}}, "Trace"},
		{Options{Workers: MaxWorkers + 1}, "Workers"},
		{Options{Window: &Window{Left: -2, Right: 0}}, "Window"},
		{Options{Window: &Window{Left: 3, Right: -5}}, "Window"},
		{Options{Window: &Window{Left: 3, Right: 1}, Causal: true}, "Window"}, // causal hides what Right shows
		{Options{Softcap: -1}, "Softcap"},
		{Options{Softcap: math.NaN()}, "Softcap"},
		{Options{Softcap: math.Inf(1)}, "Softcap"},
		{Options{Softcap: 1e39}, "Softcap"},       // beyond float32
		{Options{ALiBi: []float64{0.5}}, "ALiBi"}, // Hq = 2 slopes wanted
		{Options{ALiBi: []float64{0.5, 0.25, 0.125}}, "ALiBi"},
		{Options{ALiBi: []float64{}}, "ALiBi"},
		{Options{ALiBi: []float64{0.5, math.NaN()}}, "ALiBi"},
		{Options{ALiBi: []float64{math.Inf(-1), 1}}, "ALiBi"},
		{Options{ALiBi: []float64{1e38, 1}}, "ALiBi"}, // times a distance of 3: beyond float32
	} {
		var oe *OptionError
		if _, err := Forward(q, k, v, &c.o); !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("%+v: got %v, want *OptionError for %s", c.o, err, c.option)
		}
	}
	// An lse longer than B*Hq*Nq is refused too.
	res, err := Forward(q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	var de *DataError
	if _, err := Backward(q, k, v, res.Out, res.Out, append(res.LSE, 0), nil); !errors.As(err, &de) || de.Arg != "lse" {
		t.Errorf("lse one longer: %v, want *DataError for lse", err)
	}
	// Window bounds of -1 and 0, Causal with Right -1 or 0, negative slopes
	// are valid.
	for _, o := range []Options{{Window: &Window{Left: -1, Right: -1}}, {Window: &Window{Left: 0, Right: 0}},
		{Window: &Window{Left: 2, Right: -1}, Causal: true}, {Window: &Window{Left: -1, Right: 0}, Causal: true},
		{ALiBi: []float64{-0.5, 0}, Softcap: 1e-3}} {
		if _, err := Forward(q, k, v, &o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// A tiny positive scale is valid.
	if _, err := Forward(q, k, v, &Options{Scale: 1e-30}); err != nil {
		t.Errorf("scale 1e-30: %v", err)
	}
}

func TestBackendChoice(t *testing.T) {
	d := Dims{B: 1, Nq: 4, Nk: 4, Hq: 1, Hkv: 1, D: 8}
	q, k, v := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3)
	res, err := Forward(q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case res.Backend == CPUFlash && !strings.Contains(res.Reason, "GPU not used"):
		t.Errorf("Auto fell back to the CPU without saying why: %q", res.Reason)
	case res.Backend != CPUFlash && res.Backend != GPU:
		t.Errorf("Auto picked %v", res.Backend)
	}
	// Only the CPU flash path can fill a trace, so a trace makes Auto pick it.
	res, err = Forward(q, k, v, &Options{Trace: &Trace{}})
	if err != nil || res.Backend != CPUFlash {
		t.Errorf("Auto with a trace: %v, %v", res.Backend, err)
	}
	res, err = Forward(q, k, v, &Options{Backend: CPUNaive})
	if err != nil || res.Backend != CPUNaive || res.Reason != "requested" {
		t.Errorf("CPUNaive: %+v, %v", res, err)
	}
}

// TestGPURunsScoreMods: every GPU entry runs a window, softcap and ALiBi
// (the modified forward kernels, the modified backward pair; packed
// sequences through the same kernels; the decode kernel), so none refuses
// them: with Backend GPU a call runs, or is refused for want of a GPU, never
// with an *UnsupportedError naming the modifier, and Auto never falls back
// for one. A window that is just the causal mask stays the plain kernels'.
func TestGPURunsScoreMods(t *testing.T) {
	d := Dims{B: 1, Nq: 6, Nk: 9, Hq: 2, Hkv: 1, D: 64}
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	vl := Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 5, 9}}
	for _, c := range []struct {
		o       Options
		feature string
	}{
		{Options{Window: &Window{Left: 2, Right: -1}}, "sliding window"},
		{Options{Window: &Window{Left: -1, Right: 3}}, "sliding window"},
		{Options{Window: &Window{Left: 4, Right: 0}, Causal: true}, "sliding window"},
		{Options{Softcap: 20}, "softcap"},
		{Options{ALiBi: []float64{0.5, 0.25}, Causal: true}, "ALiBi"},
	} {
		p, err := c.o.resolve(d)
		if f, _ := p.modFeature(); err != nil || !p.mods() || f != c.feature {
			t.Errorf("%+v: %+v, %v; want a problem with the modifier %s", c.o, p, err, c.feature)
		}
		o := c.o
		o.Backend = GPU
		refused := func(call string, err error) {
			var ue *UnsupportedError
			if errors.As(err, &ue) && ue.Feature == c.feature {
				t.Errorf("GPU %s %+v: %v, want it run (or refused for want of a GPU)", call, c.o, err)
			}
		}
		res, err := Forward(q, k, v, &o)
		refused("forward", err)
		lse := make([]float32, d.LSELen())
		_, err = Backward(q, k, v, New(d.QShape()), dO, lse, &o)
		refused("backward", err)
		_, err = ForwardVarlen(q, k, v, vl, &o)
		refused("varlen forward", err)
		_, err = BackwardVarlen(q, k, v, New(d.QShape()), dO, lse, vl, &o)
		refused("varlen backward", err)
		o.Backend = Auto
		if res, err = Forward(q, k, v, &o); err != nil || res.Backend != GPU && strings.Contains(res.Reason, c.feature) {
			t.Errorf("Auto forward %+v: %v (%v), want it run without refusing %s", c.o, res, err, c.feature)
		}
		g, err := Backward(q, k, v, New(d.QShape()), dO, lse, &o)
		if err != nil || g.Backend != GPU && strings.Contains(g.Reason, c.feature) {
			t.Errorf("Auto backward %+v: %v (%v), want it run without refusing %s", c.o, g, err, c.feature)
		}
	}
	p, err := (&Options{Window: &Window{Left: -1, Right: 0}}).resolve(d)
	if err != nil || !p.Causal || p.mods() {
		t.Errorf("Window{-1, 0}: %+v, %v; want the causal problem, which the plain kernels run", p, err)
	}
}

// TestWindowPastEveryKey: a reach at least Nk back or Nq ahead is the
// unbounded side (-1), so no backend adds a huge Left to an index or passes
// it through int32 (MaxInt-3 would become -4); a reach inside the matrix is
// kept.
func TestWindowPastEveryKey(t *testing.T) {
	d := Dims{B: 1, Nq: 70, Nk: 40, Hq: 1, Hkv: 1, D: 8}
	for _, c := range []struct {
		w                    Window
		causal               bool
		wantLeft, wantRight  int
		wantCausal, wantMods bool
	}{
		{Window{math.MaxInt, math.MaxInt}, false, -1, -1, false, false},
		{Window{math.MaxInt - 3, 3}, false, -1, 3, false, true},
		{Window{40, 70}, false, -1, -1, false, false},
		{Window{39, 69}, false, 39, 69, false, true},
		{Window{math.MaxInt, 0}, false, -1, 0, true, false},
		{Window{math.MaxInt, -1}, true, -1, 0, true, false},
	} {
		p, err := (&Options{Window: &c.w, Causal: c.causal}).resolve(d)
		if err != nil || p.Left != c.wantLeft || p.Right != c.wantRight || p.Causal != c.wantCausal || p.mods() != c.wantMods {
			t.Errorf("%+v causal %v: Left %d Right %d causal %v mods %v (%v); want %d %d %v %v",
				c.w, c.causal, p.Left, p.Right, p.Causal, p.mods(), err, c.wantLeft, c.wantRight, c.wantCausal, c.wantMods)
		}
	}
}

// TestBackwardMinusInfLSE: an LSE of -Inf says the row saw no key; both
// backends then treat its P as 0 instead of computing exp(S + Inf). Only a
// row the causal mask hides every key from may say so: a -Inf LSE on a row
// that sees keys would silently zero its gradients, and is refused.
func TestBackwardMinusInfLSE(t *testing.T) {
	d := Dims{B: 1, Nq: 5, Nk: 3, Hq: 1, Hkv: 1, D: 8} // causal: rows 0 and 1 see no key
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	for _, be := range []Backend{CPUNaive, CPUFlash} {
		o := &Options{Backend: be, Causal: true}
		res, err := Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		if !math.IsInf(float64(res.LSE[1]), -1) || math.IsInf(float64(res.LSE[2]), 0) {
			t.Fatalf("%v: LSE %v, want -Inf exactly for rows 0 and 1", be, res.LSE)
		}
		g, err := Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range append(append(g.DQ.Data, g.DK.Data...), g.DV.Data...) {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%v: non-finite gradient %v", be, x)
			}
		}
		for x := 0; x < d.D; x++ {
			if g.DQ.At(0, 1, 0, x) != 0 {
				t.Fatalf("%v: dQ of the row that sees no key is %v, want 0", be, g.DQ.At(0, 1, 0, x))
			}
		}
		res.LSE[2] = float32(math.Inf(-1)) // row 2 sees key 0
		var de *DataError
		if _, err := Backward(q, k, v, res.Out, dO, res.LSE, o); !errors.As(err, &de) || de.Arg != "lse" {
			t.Fatalf("%v: -Inf LSE on a row that sees keys: %v, want *DataError for lse", be, err)
		}
		if _, err := Backward(q, k, v, res.Out, dO, res.LSE, &Options{Backend: be}); !errors.As(err, &de) {
			t.Fatalf("%v: -Inf LSE without a mask: %v, want *DataError", be, err)
		}
	}
}
