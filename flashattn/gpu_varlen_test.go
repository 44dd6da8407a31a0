package flashattn_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestGPUVarlenConformance runs the suite's varlen cases on both kernel
// paths (the sm_75 one from its PTX; on an H100/H200 the default path runs
// the Hopper forward's varlen twins at its head dims): one FwdVarlen launch per forward call
// and the three varlen backward kernels per backward call, every sequence
// checked against its own truth (empty sequences, queries without keys,
// keys without queries, Nq != Nk, causal, GQA, odd lengths). Outputs and
// gradients are NaN-poisoned before the launches, so attntest reports any
// element left unwritten. The cases with score modifiers run the modified
// kernels on the packed sequences (forward: the path's own kernel at every
// head dim, sm_80+ at D 96-256 too; backward: the varlen pre, then the
// modified pair, refused at D 256, which has no three-kernel backward).
func TestGPUVarlenConformance(t *testing.T) {
	dev := openGPU(t)
	for _, path := range []int{0, 75} {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		t.Run("path"+itoa(path), func(t *testing.T) {
			if got, want := dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions), dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil); !slices.Equal(got, want) {
				t.Errorf("PackedModHeadDims(FP16) = %v, want every head dim of the path, %v", got, want)
			}
			sm := "_sm80_"
			if path == 75 || dev.Info().Arch() < 80 {
				sm = "_sm75_"
			}
			b := attntest.Backend{Name: "gpu-varlen-path" + itoa(path), Precision: attntest.FP16, Plain: true, HeadDims: dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil),
				ModsVarlen: dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions), VarlenBackward: dev.SupportedHeadDims(flashattn.OpVarlenBackward, flashattn.FP16, nil),
				ForwardVarlen: func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Result, error) {
					res, err := dev.ForwardVarlenHost(q, k, v, vl, o)
					sm := sm
					if path == 0 && dev.Info().Arch() == 90 && !hasMods(o) && slices.Contains(flashattn.HopperHeadDims(), q.Shape.D) {
						sm = "_sm90a_" // the Hopper forward's varlen twins
					}
					if want := varlenForwardSuffix(o); err == nil && (!strings.Contains(res.Reason, want) || !strings.Contains(res.Reason, sm)) {
						t.Errorf("ran %s, want one %s%s kernel", res.Reason, sm, want)
					}
					return res, err
				},
				BackwardVarlen: func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error) {
					g, err := dev.BackwardVarlenHost(q, k, v, out, dOut, lse, vl, o)
					if err == nil && !varlenBackwardKernels(symbolRe.FindAllString(g.Reason, -1), hasMods(o)) {
						t.Errorf("ran %s, want the varlen pre and two _varlen (with modifiers: _mod) backward kernels, or the modified single pass", g.Reason)
					}
					return g, err
				}}
			attntest.RunVarlen(t, b)
		})
	}
	if err := dev.ForcePath(0); err != nil {
		t.Fatal(err)
	}
	// The public entry with Backend GPU runs the same launch.
	c := attntest.VarlenCases()[1]
	q, k, v, _ := c.Inputs()
	o := c.Options()
	want, err := dev.ForwardVarlenHost(q, k, v, c.Varlen(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Backend = flashattn.GPU
	got, err := flashattn.ForwardVarlen(q, k, v, c.Varlen(), o)
	if err != nil || got.Backend != flashattn.GPU || got.Reason != want.Reason {
		t.Fatalf("ForwardVarlen with Backend GPU: %v, %+v", err, got)
	}
	for i := range want.Out.Data {
		if got.Out.Data[i] != want.Out.Data[i] {
			t.Fatalf("ForwardVarlen with Backend GPU differs from ForwardVarlenHost at %d", i)
		}
	}
	// And the backward: the public entry's launches are the device's, and
	// (no atomics) a second call gives the same bits.
	_, _, _, dO := c.Inputs()
	o.Backend = flashattn.Auto
	gw, err := dev.BackwardVarlenHost(q, k, v, want.Out, dO, want.LSE, c.Varlen(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Backend = flashattn.GPU
	for range 2 {
		gg, err := flashattn.BackwardVarlen(q, k, v, want.Out, dO, want.LSE, c.Varlen(), o)
		if err != nil || gg.Backend != flashattn.GPU || gg.Reason != gw.Reason {
			t.Fatalf("BackwardVarlen with Backend GPU: %v, %+v", err, gg)
		}
		for _, x := range [][2]*flashattn.Tensor{{gg.DQ, gw.DQ}, {gg.DK, gw.DK}, {gg.DV, gw.DV}} {
			for i := range x[0].Data {
				if x[0].Data[i] != x[1].Data[i] {
					t.Fatalf("BackwardVarlen with Backend GPU differs from BackwardVarlenHost at %d", i)
				}
			}
		}
	}
}

// hasMods reports whether o asks for a window, softcap or ALiBi (the suite's
// windows are never the plain causal mask).
func hasMods(o *flashattn.Options) bool {
	return o != nil && (o.Window != nil || o.Softcap != 0 || o.ALiBi != nil)
}

// varlenForwardSuffix is what the symbol of a varlen forward with options o
// holds: "_mod" (the modified kernel on the packed sequences) or "_varlen".
func varlenForwardSuffix(o *flashattn.Options) string {
	if hasMods(o) {
		return "_mod"
	}
	return "_varlen"
}

// TestGPUVarlenBF16: the bf16 varlen kernels (sm_80 path; on an H100/H200
// the Hopper forward's at its head dims), forward and
// backward, through the Device API, against the suite's bf16 baseline; the
// backward again with Options.Deterministic (D 256: the ordered twin).
func TestGPUVarlenBF16(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() < 80 {
		t.Skip("bf16 needs sm_80")
	}
	if got, want := dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.BF16, modOptions), dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil); !slices.Equal(got, want) {
		t.Errorf("PackedModHeadDims(BF16) = %v, want every head dim of the path, %v", got, want)
	}
	for _, det := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "deterministic"}[det], func(t *testing.T) {
			b := attntest.Backend{Name: "gpu-varlen-bf16", Precision: attntest.BF16, Plain: true, HeadDims: dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil),
				ModsVarlen: dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.BF16, modOptions), VarlenBackward: dev.SupportedHeadDims(flashattn.OpVarlenBackward, flashattn.BF16, nil),
				ForwardVarlen: bf16ForwardVarlenHost(dev), BackwardVarlen: bf16BackwardVarlenHost(dev)}
			if det {
				b.Name, b.BackwardVarlen = b.Name+"-deterministic", withDeterministicVarlen(b.BackwardVarlen)
			}
			attntest.RunVarlen(t, b)
		})
	}
}

// bf16ForwardVarlenHost is ForwardVarlenHost in bf16: upload (UploadBF16),
// Device.ForwardVarlen (which must run a bf16 varlen kernel), download.
func bf16ForwardVarlenHost(dev *flashattn.Device) func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Result, error) {
	return func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (res *flashattn.Result, err error) {
		in, free, err := uploadBF16(dev, q, k, v)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, free()) }()
		r, err := dev.ForwardVarlen(in[0], in[1], in[2], vl, o)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, r.Free()) }()
		if !strings.Contains(r.Kernel.Symbol, varlenForwardSuffix(o)) || !strings.Contains(r.Kernel.Symbol, "_bf16") {
			return nil, errors.New("bf16 varlen ran " + r.Kernel.Symbol)
		}
		out, err := r.Out.Download()
		if err != nil {
			return nil, err
		}
		lse, err := r.LSE()
		return &flashattn.Result{Dims: r.Dims, Out: out, LSE: lse, Backend: flashattn.GPU}, err
	}
}

// bf16BackwardVarlenHost is BackwardVarlenHost in bf16: the forward again on
// the device (the suite hands the host copy of its output, which
// BackwardVarlen does not take), then the backward, which must run bf16
// varlen kernels (varlenBackwardKernels); Reason names them.
func bf16BackwardVarlenHost(dev *flashattn.Device) func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error) {
	return func(q, k, v, _, dOut *flashattn.Tensor, _ []float32, vl flashattn.Varlen, o *flashattn.Options) (g *flashattn.Grads, err error) {
		in, free, err := uploadBF16(dev, q, k, v, dOut)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, free()) }()
		r, err := dev.ForwardVarlen(in[0], in[1], in[2], vl, o)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, r.Free()) }()
		dg, err := dev.BackwardVarlen(in[0], in[1], in[2], r, in[3], vl, o)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, dg.Free()) }()
		var syms []string
		for _, k := range dg.Kernels {
			if syms = append(syms, k.Symbol); !strings.Contains(k.Symbol, "_bf16") {
				return nil, errors.New("bf16 varlen backward ran " + k.Symbol)
			}
		}
		if !varlenBackwardKernels(syms, hasMods(o)) {
			return nil, fmt.Errorf("bf16 varlen backward ran %v", syms)
		}
		g = &flashattn.Grads{Backend: flashattn.GPU, Reason: strings.Join(syms, " ")}
		for _, x := range []struct {
			dst **flashattn.Tensor
			src *flashattn.DeviceTensor
		}{{&g.DQ, dg.DQ}, {&g.DK, dg.DK}, {&g.DV, dg.DV}} {
			if *x.dst, err = x.src.Download(); err != nil {
				return nil, err
			}
		}
		return g, nil
	}
}

// withDeterministicVarlen runs a varlen backward with Options.Deterministic
// set (on a copy), as withDeterministic.
func withDeterministicVarlen(bwd func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error)) func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error) {
	return func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error) {
		c := flashattn.Options{}
		if o != nil {
			c = *o
		}
		c.Deterministic = true
		return bwd(q, k, v, out, dOut, lse, vl, &c)
	}
}

// TestGPUVarlenDeterministicRepeats: D 256's packed backward with
// Options.Deterministic (the ordered twin of the single pass the device
// runs) three times per case, fp16 and bf16: the same bits in dQ, dK and dV
// every time. Sequences of up to 66
// key blocks of 32 beside empty and one-row ones, GQA, causal with Nq != Nk
// both ways, and every modifier; accuracy is the suite's (the deterministic
// conformance runs, TestGPUVarlenBF16).
func TestGPUVarlenDeterministicRepeats(t *testing.T) {
	dev := openGPU(t)
	if !slices.Contains(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, modOptions), 256) {
		t.Skipf("%s runs no D 256 backward", dev.Info())
	}
	type fwdFn = func(q, k, v *flashattn.Tensor, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Result, error)
	type bwdFn = func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, vl flashattn.Varlen, o *flashattn.Options) (*flashattn.Grads, error)
	dtypes := []struct {
		name string
		fwd  fwdFn
		bwd  bwdFn
	}{{"fp16", dev.ForwardVarlenHost, dev.BackwardVarlenHost}, {"bf16", bf16ForwardVarlenHost(dev), bf16BackwardVarlenHost(dev)}}
	lq, lk := []int{700, 1, 0, 1300, 129}, []int{2100, 64, 33, 1000, 1}
	cases := []attntest.Case{
		{Name: "plain"},
		{Name: "causal", Causal: true},
		{Name: "window-softcap-alibi", Window: &flashattn.Window{Left: 300, Right: 40}, Softcap: 30, ALiBi: true},
	}
	for _, dt := range dtypes {
		for i, c := range cases {
			c.Hq, c.Hkv, c.D, c.Seed = 4, 2, 256, uint64(71000+1000*i)
			vc := attntest.VarlenCase{Case: c, LensQ: lq, LensK: lk}
			t.Run(dt.name+"/"+c.Name, func(t *testing.T) {
				q, k, v, dO := vc.Inputs()
				vl, o := vc.Varlen(), vc.Options()
				res, err := dt.fwd(q, k, v, vl, o)
				if err != nil {
					t.Fatal(err)
				}
				det := *o
				det.Deterministic = true
				var first *flashattn.Grads
				for i := range 3 {
					g, err := dt.bwd(q, k, v, res.Out, dO, res.LSE, vl, &det)
					if err != nil {
						t.Fatal(err)
					}
					if syms := symbolRe.FindAllString(g.Reason, -1); len(syms) != 3 || !strings.HasPrefix(syms[1], "fa2_bwd_dkdvqdet_sm80_d256") {
						t.Fatalf("deterministic D 256 varlen backward ran %q, want the ordered twin and its convert kernel", g.Reason)
					}
					if i == 0 {
						first = g
						continue
					}
					sameBits(t, fmt.Sprintf("call %d", i), g, first)
				}
			})
		}
	}
}

// symbolRe finds the kernel symbols in a Result's or Grads' Reason.
var symbolRe = regexp.MustCompile(`fa2_\w+`)

// varlenBackwardKernels says whether syms are the varlen backward's kernels:
// the varlen pre, then dK/dV and dQ ending _varlen (with modifiers: the
// modified pair, _mod), or at a head dim whose only backward is the single
// pass its modified kernel (modifiers or not) and the convert kernel.
func varlenBackwardKernels(syms []string, mods bool) bool {
	if len(syms) != 3 || !strings.HasPrefix(syms[0], "fa2_bwd_pre_") || !strings.HasSuffix(syms[0], "_varlen") {
		return false
	}
	if strings.HasPrefix(syms[1], "fa2_bwd_dkdvq_") || strings.HasPrefix(syms[1], "fa2_bwd_dkdvqdet_") {
		return strings.HasSuffix(syms[1], "_mod") && strings.HasPrefix(syms[2], "fa2_bwd_dqconv_")
	}
	want := map[bool]string{false: "_varlen", true: "_mod"}[mods]
	return strings.HasPrefix(syms[1], "fa2_bwd_dkdv_") && strings.HasSuffix(syms[1], want) &&
		strings.HasPrefix(syms[2], "fa2_bwd_dq_") && strings.HasSuffix(syms[2], want)
}

// TestGPUVarlenErrors: a Varlen that does not describe the device tensors is
// a *DataError before any launch, as on the host. At D 256 the varlen
// backward is the modified single pass (atomic dQ) where it fits the device,
// with Options.Deterministic its ordered twin (the same row, pre and convert
// kernels); where neither fits every D 256 varlen backward is an
// *UnsupportedError.
func TestGPUVarlenErrors(t *testing.T) {
	dev := openGPU(t)
	c := attntest.VarlenCases()[0]
	q, k, v, _ := c.Inputs()
	var in []*flashattn.DeviceTensor
	for _, x := range []*flashattn.Tensor{q, k, v} {
		d, err := dev.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, d)
		defer d.Free()
	}
	vl := c.Varlen()
	bad := flashattn.Varlen{CuSeqlensQ: append([]int(nil), vl.CuSeqlensQ...), CuSeqlensK: vl.CuSeqlensK}
	bad.CuSeqlensQ[2], bad.CuSeqlensQ[3] = bad.CuSeqlensQ[3], bad.CuSeqlensQ[2] // decreasing
	var de *flashattn.DataError
	if _, err := dev.ForwardVarlen(in[0], in[1], in[2], bad, nil); !errors.As(err, &de) || de.Arg != "cu_seqlens_q" {
		t.Errorf("decreasing cu_seqlens_q: %v, want *DataError", err)
	}
	short := flashattn.Varlen{CuSeqlensQ: vl.CuSeqlensQ[:len(vl.CuSeqlensQ)-1], CuSeqlensK: vl.CuSeqlensK[:len(vl.CuSeqlensK)-1]}
	if _, err := dev.ForwardVarlen(in[0], in[1], in[2], short, nil); !errors.As(err, &de) {
		t.Errorf("lengths short of the total: %v, want *DataError", err)
	}
	var ue *flashattn.UnsupportedError
	r, err := dev.ForwardVarlen(in[0], in[1], in[2], vl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	// The backward: the same checks, and its kernels' head dims.
	if _, err := dev.BackwardVarlen(in[0], in[1], in[2], r, in[0], bad, nil); !errors.As(err, &de) || de.Arg != "cu_seqlens_q" {
		t.Errorf("backward, decreasing cu_seqlens_q: %v, want *DataError", err)
	}
	g, err := dev.BackwardVarlen(in[0], in[1], in[2], r, in[0], vl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Free(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil), 256) { // no three-kernel row at D256: the modified single pass, where it fits
		runs := slices.Contains(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, modOptions), 256)
		c.D = 256
		q, k, v, dO := c.Inputs()
		// The D256 modified forward takes packed sequences too (the suite
		// checks its values, and the backward's).
		for _, o := range []*flashattn.Options{{Causal: true}, {Softcap: 3}} {
			res, err := dev.ForwardVarlenHost(q, k, v, vl, o)
			if err != nil {
				t.Fatalf("D256 varlen forward %+v: %v", o, err)
			}
			if want := varlenForwardSuffix(o); !strings.Contains(res.Reason, "_d256") || !strings.Contains(res.Reason, want) {
				t.Errorf("D256 varlen forward %+v ran %s, want the d256 %s kernel", o, res.Reason, want)
			}
			g, err := dev.BackwardVarlenHost(q, k, v, res.Out, dO, res.LSE, vl, o)
			switch {
			case runs && (err != nil || !varlenBackwardKernels(symbolRe.FindAllString(g.Reason, -1), hasMods(o))):
				t.Errorf("D256 varlen backward %+v: %v, ran %q; want the varlen pre, the modified single pass and its convert kernel", o, err, reasonOf(g))
			case !runs && !errors.As(err, &ue):
				t.Errorf("D256 varlen backward %+v: %v, want *UnsupportedError (no single pass here)", o, err)
			}
			def := symbolRe.FindAllString(reasonOf(g), -1)
			det := *o
			det.Deterministic = true
			g, err = dev.BackwardVarlenHost(q, k, v, res.Out, dO, res.LSE, vl, &det)
			syms := symbolRe.FindAllString(reasonOf(g), -1)
			switch {
			case runs && (err != nil || len(def) != 3 || !slices.Equal(syms, []string{def[0], strings.Replace(def[1], "_dkdvq_", "_dkdvqdet_", 1), def[2]})):
				t.Errorf("D256 deterministic varlen backward %+v: %v, ran %q; want the default call's %v with its single pass's ordered twin", o, err, reasonOf(g), def)
			case !runs && !errors.As(err, &ue):
				t.Errorf("D256 deterministic varlen backward %+v: %v, want *UnsupportedError (no single pass here)", o, err)
			}
		}
	}
}

// TestGPUBenchVarlen: the varlen benchmark times both calls and counts the
// padded call's memory above the packed one's.
func TestGPUBenchVarlen(t *testing.T) {
	dev := openGPU(t)
	r, err := dev.BenchVarlen([]int{100, 300, 37}, 4, 2, 64, &flashattn.Options{Causal: true}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Varlen.MedianMs <= 0 || r.Padded.MedianMs <= 0 || !strings.HasSuffix(r.Varlen.Kernel.Symbol, "_causal_varlen") ||
		r.Padded.Kernel.Pass != "fwd" || r.VarlenBytes >= r.PaddedBytes {
		t.Errorf("BenchVarlen: %+v", r)
	}
	if _, err := dev.BenchVarlen([]int{4, 0}, 4, 2, 64, nil, 1, 1); err == nil {
		t.Error("an empty sequence: no error")
	}
	// The backward: the three varlen kernels (dK/dV named), the padded
	// batch's default backward, the lengths counted in the varlen call's memory.
	b, err := dev.BenchVarlenBackward([]int{100, 300, 37}, 4, 2, 64, &flashattn.Options{Causal: true}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Varlen.MedianMs <= 0 || b.Padded.MedianMs <= 0 || !b.Varlen.Backward || !strings.HasPrefix(b.Varlen.Kernel.Symbol, "fa2_bwd_dkdv_sm") || !strings.HasSuffix(b.Varlen.Kernel.Symbol, "_d64_causal_varlen") ||
		!b.Padded.Backward || b.VarlenBytes >= b.PaddedBytes || b.Varlen.ExtraBytes != 4*int64(4*437+2*4) {
		t.Errorf("BenchVarlenBackward: %+v", b)
	}
}
