package flashattn

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/internal/kernels"
)

// The plan tests need no GPU: a planDevice is numbers. What each call should
// run comes from docs/api.md's "GPU support" (the paths, the head dims per
// call, which backward runs where, Deterministic, the Hopper forward) and
// the kernels' documented names (fa2_<pass>_sm<path>_d<D>[_large][_bf16]
// [_causal][_mod...|_varlen], KernelTable and BackwardKernelTable), not from
// the plan itself.

// planGPU is one GPU as the plan sees it, and what the docs say of it.
type planGPU struct {
	c      planDevice
	bf16   bool // path 80: bf16 kernels
	large  bool // the large single-pass tiles fit (A100, H100/H200: 161-162 KiB)
	hopper bool // dense forwards at D 64 and 128 run the Hopper kernels
}

func planGPUs() []planGPU {
	dev := func(name string, path, optinKiB, sms int) planDevice {
		return planDevice{name: name, path: path, smemOptin: optinKiB << 10, smemPerSM: (optinKiB + 1) << 10,
			sms: sms, ctas: sms, maxGridY: 65535}
	}
	h100 := dev("H100 (sm_90)", 80, 227, 132)
	h100.sm90a = true
	return []planGPU{
		{c: dev("T4 (sm_75)", 75, 64, 40)},
		{c: dev("A100 (sm_80)", 80, 163, 108), bf16: true, large: true},
		{c: dev("A10 (sm_86)", 80, 99, 72), bf16: true},
		{c: dev("L4 (sm_89)", 80, 99, 58), bf16: true},
		{c: h100, bf16: true, large: true, hopper: true},
		{c: dev("H100 ForcePath(80)", 80, 227, 132), bf16: true, large: true},
		{c: dev("H100 ForcePath(75)", 75, 227, 132)}, // the Turing PTX: Turing's kernels
	}
}

// gpuHeadDims are the head dims docs/api.md lists for every call of both
// paths (the raw backward stops at 128 on path 80).
var gpuHeadDims = []int{32, 64, 96, 128, 256}

// sym is a kernel's documented name: pass (fwd, bwd_pre, bwd_dkdvqdet, ...)
// on path (75, 80, "90a"), and its suffix (_mod..., _varlen).
func sym(pass string, path any, d int, large, bf16, causal bool, suffix string) string {
	s := fmt.Sprintf("fa2_%s_sm%v_d%d", pass, path, d)
	if large {
		s += "_large"
	}
	if bf16 {
		s += "_bf16"
	}
	if causal {
		s += "_causal"
	}
	return s + suffix
}

// want is one expected kernel: its symbol and KernelInfo.Pass.
type want struct{ symbol, pass string }

func kern(pass string, path any, d int, large, bf16, causal bool, suffix string) want {
	return want{sym(pass, path, d, large, bf16, causal, suffix), pass + suffix}
}

// scoreMods are the modifier sets of a call: the window (causal is its
// right edge 0), softcap and ALiBi, and the suffix of the modified forward
// that has them compiled in.
var scoreMods = []struct {
	name           string
	left           int
	softcap        float64
	alibi          bool
	forwardSuffix  string
	noneOfThemSets bool
}{
	{name: "plain", left: -1, noneOfThemSets: true},
	{name: "window", left: 100, forwardSuffix: "_mod"},
	{name: "softcap", left: -1, softcap: 30, forwardSuffix: "_mod_cap"},
	{name: "alibi", left: -1, alibi: true, forwardSuffix: "_mod_alibi"},
	{name: "softcap+alibi", left: -1, softcap: 30, alibi: true, forwardSuffix: "_mod_cap_alibi"},
}

// planProblem is a call of B 2, Nq 256, Nk nk, 8/2 heads at head dim d.
func planProblem(t *testing.T, d, nk int, causal bool, left int, softcap float64, alibi, varlen, det bool) problem {
	t.Helper()
	o := &Options{Causal: causal, Softcap: softcap, Deterministic: det}
	if left >= 0 {
		o.Window = &Window{Left: left, Right: -1}
		if causal {
			o.Window.Right = 0
		}
	}
	if alibi {
		o.ALiBi = []float64{1, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125}
	}
	dims := Dims{B: 2, Nq: 256, Nk: nk, Hq: 8, Hkv: 2, D: d}
	if varlen {
		dims = Dims{B: 1, Nq: 400, Nk: 400, Hq: 8, Hkv: 2, D: d}
	}
	p, err := o.resolve(dims)
	if err != nil {
		t.Fatal(err)
	}
	if varlen {
		cu := []int{0, 100, 393, 400}
		p.entry, p.varlen = varlenEntry, &Varlen{CuSeqlensQ: cu, CuSeqlensK: cu}
	}
	return p
}

// checkPlan compares a plan's kernels with ws, or its error with an
// *UnsupportedError for ws nil.
func checkPlan(t *testing.T, what string, pl plan, err error, ws []want) {
	t.Helper()
	if ws == nil {
		var ue *UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v (kernels %v), want an *UnsupportedError", what, err, symbols(pl.kernels))
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v, want %v", what, err, ws)
		return
	}
	var got []want
	for _, v := range pl.kernels {
		got = append(got, want{v.Symbol, kernelInfo(v).Pass})
	}
	if !slices.Equal(got, ws) {
		t.Errorf("%s: kernels %v, want %v", what, got, ws)
	}
	if len(pl.cfgs) != len(pl.kernels) {
		t.Errorf("%s: %d launches for %d kernels", what, len(pl.cfgs), len(pl.kernels))
	}
}

func symbols(vs []kernels.Variant) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Symbol)
	}
	return out
}

// TestPlanForward: every path, dtype, head dim, mask, modifier set and
// packing gets the forward docs/api.md promises, and what it does not
// promise is an *UnsupportedError.
func TestPlanForward(t *testing.T) {
	for _, g := range planGPUs() {
		for _, dt := range []DType{FP16, BF16} {
			for _, d := range append([]int{16, 48, 512}, gpuHeadDims...) {
				for _, causal := range []bool{false, true} {
					for _, m := range scoreMods {
						for _, varlen := range []bool{false, true} {
							p := planProblem(t, d, 8192, causal, m.left, m.softcap, m.alibi, varlen, false)
							pl, err := planOf(g.c, planRequest{op: opForward, p: p, dt: dt})
							what := fmt.Sprintf("%s %v D%d causal %v %s varlen %v", g.c.name, dt, d, causal, m.name, varlen)
							checkPlan(t, what, pl, err, wantForward(g, dt, d, causal, m.forwardSuffix, varlen))
						}
					}
				}
			}
		}
	}
}

func wantForward(g planGPU, dt DType, d int, causal bool, mods string, varlen bool) []want {
	bf16 := dt == BF16
	if !slices.Contains(gpuHeadDims, d) || bf16 && !g.bf16 {
		return nil
	}
	if mods != "" {
		causal = false // the window's right edge
	}
	hopper := g.hopper && (!varlen || mods == "") && (d == 64 || d == 128) // long calls: above any SM80CausalMaxNk
	if varlen && mods == "" {
		mods = "_varlen"
	}
	if hopper && mods == "" && shortMaxNq(d) >= 256 { // planProblem's Nq
		mods = "_short"
	}
	if hopper {
		return []want{kern("fwd", "90a", d, false, bf16, causal, mods)}
	}
	return []want{kern("fwd", g.c.path, d, false, bf16, causal, mods)}
}

// shortMaxNq is the MaxNq of head dim d's Hopper short-call kernel, 0 for none.
func shortMaxNq(d int) int {
	for _, k := range HopperKernelTable() {
		if k.Pass == "fwd_short" && k.HeadDim == d {
			return k.MaxNq
		}
	}
	return 0
}

// TestPlanHopperShort: a dense plain call of at most a short-call kernel's
// MaxNq query rows runs it, fp16 or bf16, causal or not, one row more runs
// the Hopper kernel of its key; packed sequences, the modifiers and
// ForcePath(80) never run it.
func TestPlanHopperShort(t *testing.T) {
	gs := planGPUs()
	h100, forced := gs[4], gs[5]
	n := 0
	for _, k := range HopperKernelTable() {
		if k.Pass != "fwd_short" {
			continue
		}
		n++
		bf16 := k.DType == BF16
		dt := map[bool]DType{false: FP16, true: BF16}[bf16]
		for _, nq := range []int{1, k.MaxNq, k.MaxNq + 1} {
			p := planProblem(t, k.HeadDim, 4096, k.Causal, -1, 0, false, false, false)
			p.Nq = nq
			pl, err := planOf(h100.c, planRequest{op: opForward, p: p, dt: dt})
			w := []want{{k.Symbol, "fwd_short"}}
			if nq > k.MaxNq {
				w = []want{kern("fwd", "90a", k.HeadDim, false, bf16, k.Causal, "")}
			}
			checkPlan(t, fmt.Sprintf("%s Nq %d", k.Symbol, nq), pl, err, w)
			pl, err = planOf(forced.c, planRequest{op: opForward, p: p, dt: dt})
			checkPlan(t, fmt.Sprintf("%s Nq %d ForcePath(80)", k.Symbol, nq), pl, err,
				[]want{kern("fwd", 80, k.HeadDim, false, bf16, k.Causal, "")})
		}
		for _, m := range scoreMods[1:] {
			p := planProblem(t, k.HeadDim, 4096, k.Causal, m.left, m.softcap, m.alibi, false, false)
			p.Nq = k.MaxNq
			pl, err := planOf(h100.c, planRequest{op: opForward, p: p, dt: dt})
			checkPlan(t, fmt.Sprintf("%s Nq %d %s", k.Symbol, k.MaxNq, m.name), pl, err,
				[]want{kern("fwd", "90a", k.HeadDim, false, bf16, false, m.forwardSuffix)})
		}
		p := planProblem(t, k.HeadDim, 0, k.Causal, -1, 0, false, true, false) // packed: 400 rows in all
		pl, err := planOf(h100.c, planRequest{op: opForward, p: p, dt: dt})
		checkPlan(t, k.Symbol+" packed", pl, err, []want{kern("fwd", "90a", k.HeadDim, false, bf16, k.Causal, "_varlen")})
	}
	if n == 0 {
		t.Skip("no short-call Hopper kernel in the table")
	}
}

// TestPlanBackward: every path, dtype, head dim, mask, modifier set, packing
// and Options.Deterministic gets the backward docs/api.md describes ("Which
// backward runs, on the sm_80 path"; the Turing path runs the three
// kernels), with the single pass's dQ accumulator exactly where it runs.
func TestPlanBackward(t *testing.T) {
	for _, g := range planGPUs() {
		for _, dt := range []DType{FP16, BF16} {
			for _, d := range append([]int{48}, gpuHeadDims...) {
				for _, causal := range []bool{false, true} {
					for _, m := range scoreMods[:3] { // the modified backward has run-time flags: one set shows it
						for _, varlen := range []bool{false, true} {
							for _, det := range []bool{false, true} {
								p := planProblem(t, d, 8192, causal, m.left, m.softcap, m.alibi, varlen, det)
								pl, err := planOf(g.c, planRequest{op: opBackward, p: p, dt: dt})
								what := fmt.Sprintf("%s %v D%d causal %v %s varlen %v det %v", g.c.name, dt, d, causal, m.name, varlen, det)
								ws := wantBackward(g, dt, d, causal, !m.noneOfThemSets, varlen, det)
								checkPlan(t, what, pl, err, ws)
								if err == nil && (pl.dqAccumLen > 0) != strings.Contains(ws[1].pass, "dkdvq") {
									t.Errorf("%s: dQ accumulator of %d floats with %s", what, pl.dqAccumLen, ws[1].symbol)
								}
							}
						}
					}
				}
			}
		}
	}
}

func wantBackward(g planGPU, dt DType, d int, causal, mods, varlen, det bool) []want {
	bf16, path := dt == BF16, g.c.path
	if !slices.Contains(gpuHeadDims, d) || bf16 && !g.bf16 {
		return nil
	}
	pre := kern("bwd_pre", path, d, false, bf16, false, "")
	if varlen && (mods || path == 80 && d == 256) {
		pre = kern("bwd_pre", path, d, false, bf16, false, "_varlen")
	}
	if path == 80 && d == 256 { // the single pass alone: the large tile where it fits, else the base one
		if mods || varlen { // its modified twin, or ordered one; causal is the window's right edge
			causal = false
		}
		pass, suffix := "bwd_dkdvq", ""
		if det {
			pass = "bwd_dkdvqdet"
		}
		if mods || varlen {
			suffix = "_mod"
		}
		return []want{pre, kern(pass, path, d, g.large, bf16, causal, suffix), kern("bwd_dqconv", path, d, g.large, bf16, false, "")}
	}
	switch {
	case mods:
		return []want{pre, kern("bwd_dkdv", path, d, false, bf16, false, "_mod"), kern("bwd_dq", path, d, false, bf16, false, "_mod")}
	case varlen:
		return []want{kern("bwd_pre", path, d, false, bf16, false, "_varlen"),
			kern("bwd_dkdv", path, d, false, bf16, causal, "_varlen"), kern("bwd_dq", path, d, false, bf16, causal, "_varlen")}
	}
	if g.hopper && !mods && !varlen && (d == 64 || d == 128) { // the Hopper single pass and its ordered twin, fp16 and bf16
		pass := "bwd_dkdvq"
		if det {
			pass = "bwd_dkdvqdet"
		}
		return []want{kern("bwd_pre", "90a", d, false, bf16, false, ""), kern(pass, "90a", d, false, bf16, causal, ""),
			kern("bwd_dqconv", "90a", d, false, bf16, false, "")}
	}
	three := []want{pre, kern("bwd_dkdv", path, d, false, bf16, causal, ""), kern("bwd_dq", path, d, false, bf16, causal, "")}
	if path == 75 || d == 32 || d == 96 {
		return three
	}
	// D 64: the single pass where its large tile fits; D 128 the large tile
	// there, a base one elsewhere. Deterministic: the ordered twin at D 128
	// where the large tile fits and at D 64 causal there, else the three.
	single := g.large || d == 128
	ordered := g.large && (d == 128 || causal)
	switch {
	case det && ordered:
		return []want{pre, kern("bwd_dkdvqdet", path, d, true, bf16, causal, ""), kern("bwd_dqconv", path, d, true, bf16, false, "")}
	case !det && single:
		return []want{pre, kern("bwd_dkdvq", path, d, g.large, bf16, causal, ""), kern("bwd_dqconv", path, d, g.large, bf16, false, "")}
	}
	return three
}

// TestPlanDecode: the decode kernel of every path, dtype and head dim
// (docs/api.md: decode at every GPU head dim of both paths, bf16 on path
// 80), one launch whose grid and workspace follow its splits.
func TestPlanDecode(t *testing.T) {
	for _, g := range planGPUs() {
		for _, dt := range []DType{FP16, BF16} {
			for _, d := range append([]int{16, 512}, gpuHeadDims...) {
				for _, paged := range []bool{false, true} {
					q, kc := Shape{B: 2, N: 1, H: 32, D: d}, Shape{B: 2, N: 4096, H: 8, D: d}
					p, err := resolveKVShapes(q, kc, kc, KVCache{SeqLens: []int{4096, 1000}}, &Options{Causal: true})
					if err != nil {
						t.Fatal(err)
					}
					pl, err := planOf(g.c, planRequest{op: opDecode, p: p, dt: dt, paged: paged})
					what := fmt.Sprintf("%s %v D%d paged %v", g.c.name, dt, d, paged)
					var ws []want
					if slices.Contains(gpuHeadDims, d) && (dt == FP16 || g.bf16) {
						ws = []want{kern("decode", g.c.path, d, false, dt == BF16, false, "")}
					}
					checkPlan(t, what, pl, err, ws)
					if err != nil {
						continue
					}
					if g := pl.cfgs[0].Grid; int(g[0]) != pl.splits || g[1] != 2*8 || pl.splits < 1 || pl.mergeCTAs < 1 {
						t.Errorf("%s: grid %v, %d splits merged by %d CTAs", what, g, pl.splits, pl.mergeCTAs)
					}
					if (pl.oPart > 0) != (pl.splits > 1) || pl.oPart != pl.splits*p.LSELen()*d {
						t.Errorf("%s: %d splits, partial O of %d floats", what, pl.splits, pl.oPart)
					}
				}
			}
		}
	}
}

// TestPlanRaw: the raw forward runs the plain kernels (on an H100/H200 the
// Hopper one, with the sm_80 one beside it for strides TMA cannot
// address), the raw backward the three kernels (D 256 only on Turing);
// modifiers are refused.
func TestPlanRaw(t *testing.T) {
	for _, g := range planGPUs() {
		for _, d := range gpuHeadDims {
			for _, causal := range []bool{false, true} {
				p := planProblem(t, d, 8192, causal, -1, 0, false, false, false)
				what := fmt.Sprintf("%s D%d causal %v", g.c.name, d, causal)
				pl, err := planOf(g.c, planRequest{op: opRawForward, p: p, dt: FP16})
				checkPlan(t, "raw forward "+what, pl, err, wantForward(g, FP16, d, causal, "", false))
				if hopper := err == nil && pl.kernels[0].Arch == kernels.SM90A; hopper != (pl.alt != nil) ||
					hopper && pl.alt.Symbol != sym("fwd", 80, d, false, false, causal, "") {
					t.Errorf("raw forward %s: kernel %v, sm_80 kernel beside it %+v", what, symbols(pl.kernels), pl.alt)
				}
				pl, err = planOf(g.c, planRequest{op: opRawBackward, p: p, dt: FP16})
				var ws []want
				if g.c.path == 75 || d != 256 {
					ws = []want{kern("bwd_pre", g.c.path, d, false, false, false, ""),
						kern("bwd_dkdv", g.c.path, d, false, false, causal, ""), kern("bwd_dq", g.c.path, d, false, false, causal, "")}
				}
				checkPlan(t, "raw backward "+what, pl, err, ws)
			}
		}
		p := planProblem(t, 64, 512, false, 100, 0, false, false, false)
		for _, op := range []planOp{opRawForward, opRawBackward} {
			pl, err := planOf(g.c, planRequest{op: op, p: p, dt: FP16})
			checkPlan(t, fmt.Sprintf("%s raw op %d with a window", g.c.name, op), pl, err, nil)
		}
	}
}

// TestPlanHopperShortCausal: a causal Hopper call of at most
// SM80CausalMaxNk keys runs the sm_80 kernel (HopperKernelTable).
func TestPlanHopperShortCausal(t *testing.T) {
	h100 := planGPUs()[4]
	for _, k := range HopperKernelTable() {
		if !k.Causal || k.Pass != "fwd" || k.SM80CausalMaxNk == 0 {
			continue
		}
		for _, nk := range []int{k.SM80CausalMaxNk, k.SM80CausalMaxNk + 1} {
			pl, err := planOf(h100.c, planRequest{op: opForward, p: planProblem(t, k.HeadDim, nk, true, -1, 0, false, false, false), dt: FP16})
			w := []want{kern("fwd", 80, k.HeadDim, false, false, true, "")}
			if nk > k.SM80CausalMaxNk {
				w = []want{{k.Symbol, "fwd"}}
			}
			checkPlan(t, fmt.Sprintf("causal D%d Nk %d", k.HeadDim, nk), pl, err, w)
		}
	}
}

// TestPlanRung: a ladder rung replaces the plain fp16 forward at its head
// dims (D 64: fa2_ladder<r>_d64[_causal]); what the ladder lacks (other
// head dims, bf16, modifiers, packed sequences, decode) is an
// *UnsupportedError; the backward without modifiers is the shipped one.
func TestPlanRung(t *testing.T) {
	for _, g := range []planGPU{planGPUs()[0], planGPUs()[1], planGPUs()[4]} {
		for rung := 1; rung <= kernels.LadderRungs; rung++ {
			c := g.c
			c.rung = rung
			what := fmt.Sprintf("%s rung %d", c.name, rung)
			for _, causal := range []bool{false, true} {
				suffix := ""
				if causal {
					suffix = "_causal"
				}
				pl, err := planOf(c, planRequest{op: opForward, p: planProblem(t, 64, 8192, causal, -1, 0, false, false, false), dt: FP16})
				checkPlan(t, what, pl, err, []want{{fmt.Sprintf("fa2_ladder%d_d64%s", rung, suffix), "fwd"}})
			}
			for _, r := range []planRequest{
				{op: opForward, p: planProblem(t, 128, 512, false, -1, 0, false, false, false), dt: FP16},
				{op: opForward, p: planProblem(t, 64, 512, false, -1, 0, false, false, false), dt: BF16},
				{op: opForward, p: planProblem(t, 64, 512, false, 100, 0, false, false, false), dt: FP16},
				{op: opForward, p: planProblem(t, 64, 512, false, -1, 0, false, true, false), dt: FP16},
				{op: opBackward, p: planProblem(t, 64, 512, false, -1, 5, false, false, false), dt: FP16},
			} {
				pl, err := planOf(c, r)
				checkPlan(t, fmt.Sprintf("%s op %d %v", what, r.op, r.dt), pl, err, nil)
			}
			q, kc := Shape{B: 1, N: 1, H: 8, D: 64}, Shape{B: 1, N: 64, H: 8, D: 64}
			p, err := resolveKVShapes(q, kc, kc, KVCache{SeqLens: []int{64}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := planOf(c, planRequest{op: opDecode, p: p, dt: FP16})
			checkPlan(t, what+" decode", pl, err, nil)
			p = planProblem(t, 64, 512, true, -1, 0, false, false, false)
			pl, err = planOf(c, planRequest{op: opBackward, p: p, dt: FP16})
			checkPlan(t, what+" backward", pl, err, wantBackward(g, FP16, 64, true, false, false, false))
		}
	}
}

// TestPlanNVRTC: an NVRTC build of the shipped forward replaces the plain
// fp16 forward, the Hopper one too, and nothing else; a head dim it lacks
// is an *UnsupportedError, and raw plans refuse it (its module can be
// unloaded).
func TestPlanNVRTC(t *testing.T) {
	h100 := planGPUs()[4]
	c := h100.c
	edited := kernels.Variant{Key: kernels.Key{Stage: kernels.Fwd, Arch: 80, HeadDim: 64, Causal: true}, Symbol: "fa2_fwd_sm80_d64_causal", Br: 64, Bc: 64, Warps: 4}
	c.nvrtc, c.nvrtcRung = []kernels.Variant{edited}, len(ladder)
	plain := planProblem(t, 64, 8192, true, -1, 0, false, false, false)
	pl, err := planOf(c, planRequest{op: opForward, p: plain, dt: FP16})
	if err != nil || !pl.nvrtc || pl.kernels[0] != edited || pl.cfgs[0].Grid != [3]uint32{4, 16, 1} {
		t.Errorf("edited D64 causal: %+v (%v), want the NVRTC kernel on its own tile", pl, err)
	}
	pl, err = planOf(c, planRequest{op: opRawForward, p: plain, dt: FP16})
	checkPlan(t, "raw forward on an NVRTC build", pl, err, nil)
	pl, err = planOf(c, planRequest{op: opForward, p: planProblem(t, 64, 8192, false, -1, 0, false, false, false), dt: FP16})
	checkPlan(t, "a head dim and mask the build lacks", pl, err, nil)
	for _, r := range []planRequest{
		{op: opForward, p: planProblem(t, 64, 8192, true, 100, 0, false, false, false), dt: FP16}, // modified: the Hopper one still
		{op: opForward, p: planProblem(t, 64, 8192, true, -1, 0, false, false, false), dt: BF16},  // bf16: the Hopper one (the build is fp16)
	} {
		pl, err := planOf(c, r)
		checkPlan(t, fmt.Sprintf("NVRTC build, %v", r.dt), pl, err, wantForward(h100, r.dt, 64, true, map[bool]string{true: "_mod"}[r.p.mods()], false))
	}
}

// TestPlanGrids: the launches follow the kernels' tiles (the contract of
// internal/kernels): a CTA per query block and (batch, head); packed
// sequences by the longest one; the Hopper forward persistent, one CTA per
// SM at most; the sm_80 ordered single pass with the heads fastest, the
// Hopper one with the key blocks in x; and past the grid's limits an
// *UnsupportedError.
func TestPlanGrids(t *testing.T) {
	gs := planGPUs()
	a100, h100 := gs[1], gs[4]
	p := planProblem(t, 96, 8192, false, -1, 0, false, false, false)
	pl, err := planOf(a100.c, planRequest{op: opForward, p: p, dt: FP16})
	if v := pl.kernels[0]; err != nil || pl.cfgs[0].Grid != [3]uint32{uint32(ceilDiv(256, v.Br)), 16, 1} || pl.cfgs[0].Block[0] != uint32(32*v.Warps) {
		t.Errorf("A100 D96: %+v (%v)", pl, err)
	}
	p = planProblem(t, 96, 400, false, -1, 0, false, true, false)
	pl, err = planOf(a100.c, planRequest{op: opForward, p: p, dt: FP16})
	if v := pl.kernels[0]; err != nil || pl.cfgs[0].Grid != [3]uint32{uint32(ceilDiv(293, v.Br)), 3 * 8, 1} {
		t.Errorf("A100 D96 packed (longest sequence 293, 3 sequences): %+v (%v)", pl.cfgs, err)
	}
	p = planProblem(t, 128, 8192, false, -1, 0, false, false, false)
	pl, err = planOf(h100.c, planRequest{op: opForward, p: p, dt: FP16})
	if err != nil || !pl.kernels[0].Persistent || pl.cfgs[0].Grid[0] > 132 || pl.cfgs[0].Grid[1] != 1 {
		t.Errorf("H100 D128: %+v (%v), want a persistent grid of at most 132 CTAs", pl.cfgs, err)
	}
	p = planProblem(t, 128, 8192, false, -1, 0, false, false, true)
	pl, err = planOf(gs[5].c, planRequest{op: opBackward, p: p, dt: FP16})
	if err != nil || pl.cfgs[1].Grid != [3]uint32{2 * 2, uint32(ceilDiv(8192, pl.kernels[1].Bc)), 1} {
		t.Errorf("H100 ForcePath(80) D128 deterministic: %+v (%v), want (B*Hkv, key blocks)", pl.cfgs, err)
	}
	pl, err = planOf(h100.c, planRequest{op: opBackward, p: p, dt: FP16}) // the Hopper ordered pass: key blocks in x
	if err != nil || pl.cfgs[1].Grid != [3]uint32{uint32(ceilDiv(8192, pl.kernels[1].Bc)), 2 * 2, 1} || pl.cfgs[0].Grid != [3]uint32{uint32(ceilDiv(256, pl.kernels[0].Br)), 2 * 8, 1} ||
		pl.cfgs[1].Block[0] != uint32(32*pl.kernels[1].Warps) || pl.cfgs[1].SharedMem != uint32(pl.kernels[1].SmemBytes) {
		t.Errorf("H100 D128 deterministic: %+v (%v), want (key blocks, B*Hkv)", pl.cfgs, err)
	}
	for _, c := range []struct {
		what string
		r    planRequest
	}{
		{"B*Hq past grid y", planRequest{op: opForward, p: problem{Dims: Dims{B: 70000, Nq: 16, Nk: 16, Hq: 1, Hkv: 1, D: 64}, Scale: 0.125, Left: -1, Right: -1}, dt: FP16}},
		{"the ordered single pass past grid y", planRequest{op: opBackward, p: problem{Dims: Dims{B: 1, Nq: 16, Nk: 5_000_000, Hq: 1, Hkv: 1, D: 256}, Scale: 0.0625, Left: -1, Right: -1, Deterministic: true}, dt: FP16}},
		{"a scale whose fp16 scores overflow", planRequest{op: opForward, p: problem{Dims: Dims{B: 1, Nq: 16, Nk: 16, Hq: 1, Hkv: 1, D: 64}, Scale: 1e30, Left: -1, Right: -1}, dt: FP16}},
	} {
		pl, err := planOf(h100.c, c.r)
		checkPlan(t, c.what, pl, err, nil)
	}
}

// TestPlanHeadDims: the per-device lists of docs/api.md's table are the
// head dims whose plans succeed.
func TestPlanHeadDims(t *testing.T) {
	for _, g := range planGPUs() {
		d := &Device{info: DeviceInfo{Name: g.c.name, SMs: g.c.sms}, path: g.c.path, sm90a: g.c.sm90a, smemOptin: g.c.smemOptin,
			smemPerSM: g.c.smemPerSM, maxGridY: g.c.maxGridY, ctas: g.c.ctas}
		raw := gpuHeadDims
		if g.c.path == 80 {
			raw = gpuHeadDims[:4]
		}
		var bf16 []int
		if g.bf16 {
			bf16 = gpuHeadDims
		}
		for _, c := range []struct {
			name      string
			got, want []int
		}{
			{"HeadDims", d.HeadDims(), gpuHeadDims},
			{"KVCacheHeadDims", d.KVCacheHeadDims(), gpuHeadDims},
			{"PackedModHeadDims(FP16)", d.PackedModHeadDims(FP16), gpuHeadDims},
			{"PackedModHeadDims(BF16)", d.PackedModHeadDims(BF16), bf16},
			{"ModBackwardHeadDims(FP16)", d.ModBackwardHeadDims(FP16), gpuHeadDims},
			{"ModBackwardHeadDims(BF16)", d.ModBackwardHeadDims(BF16), bf16},
			{"BackwardHeadDims", d.BackwardHeadDims(), gpuHeadDims},
			{"DeterministicBackwardHeadDims", d.DeterministicBackwardHeadDims(), gpuHeadDims},
			{"RawBackwardHeadDims", d.RawBackwardHeadDims(), raw},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("%s: %s = %v, want %v", g.c.name, c.name, c.got, c.want)
			}
		}
		d.rung = 2
		if got := d.HeadDims(); !slices.Equal(got, []int{64}) {
			t.Errorf("%s rung 2: HeadDims = %v, want [64]", g.c.name, got)
		}
		if got := d.KVCacheHeadDims(); len(got) != 0 {
			t.Errorf("%s rung 2: KVCacheHeadDims = %v, want none", g.c.name, got)
		}
	}
}

// TestKernelTablePlans: KernelTable lists the forward each head dim and
// mask plans to on a device of the arch, and nothing below Turing.
func TestKernelTablePlans(t *testing.T) {
	for _, c := range []struct{ arch, path int }{{75, 75}, {86, 80}, {90, 80}, {120, 80}} {
		var ws []string
		for _, d := range gpuHeadDims {
			for _, causal := range []bool{false, true} {
				ws = append(ws, sym("fwd", c.path, d, false, false, causal, ""))
			}
		}
		var got []string
		for _, k := range KernelTable(c.arch) {
			got = append(got, k.Symbol)
		}
		if !slices.Equal(got, ws) {
			t.Errorf("KernelTable(%d) = %v, want %v", c.arch, got, ws)
		}
	}
	if got := KernelTable(70); len(got) != 0 {
		t.Errorf("KernelTable(70) = %v, want none", got)
	}
}

// TestPlanDetSpread: the Hopper ordered non-causal pass spreads its key
// blocks' start only where a (batch, kv head)'s key blocks fit half the SMs;
// causal and the sm_80 path never.
func TestPlanDetSpread(t *testing.T) {
	gs := planGPUs()
	h100, h100sm80 := gs[4], gs[5] // gs[5]: the H100 under ForcePath(80)
	for _, c := range []struct {
		d, nk          int
		causal, forced bool
		want           bool
	}{
		{64, 8192, false, false, true},   // Tc 64 <= 132 / 2
		{128, 8192, false, false, true},  // Tc 64
		{64, 8448, false, false, true},   // Tc 66: half of 132
		{64, 8449, false, false, false},  // Tc 67
		{64, 16384, false, false, false}, // Tc 128
		{64, 8192, true, false, false},
		{64, 8192, false, true, false},
	} {
		p := planProblem(t, c.d, c.nk, c.causal, -1, 0, false, false, true)
		g := h100
		if c.forced {
			g = h100sm80
		}
		pl, err := planOf(g.c, planRequest{op: opBackward, p: p, dt: FP16})
		if err != nil || pl.detSpread != c.want {
			t.Errorf("D%d Nk %d causal %v sm_80 %v: detSpread %v (%v), want %v", c.d, c.nk, c.causal, c.forced, pl.detSpread, err, c.want)
		}
	}
}

// TestPlanCausalGroups: the Hopper plain causal pass, and it alone, orders its
// CTAs in groups (hopperCausalGroups); the ordered twin keeps its turn order.
func TestPlanCausalGroups(t *testing.T) {
	gs := planGPUs()
	h100, h100sm80 := gs[4], gs[5]
	for _, c := range []struct {
		d, nk               int
		causal, det, forced bool
		want                bool
	}{
		{128, 8192, true, false, false, true},
		{64, 2048, true, false, false, true},
		{128, 1024, true, false, false, false}, // Tc 8: lightest first
		{128, 8192, false, false, false, false},
		{128, 8192, true, true, false, false},
		{128, 8192, true, false, true, false},
	} {
		p := planProblem(t, c.d, c.nk, c.causal, -1, 0, false, false, c.det)
		g := h100
		if c.forced {
			g = h100sm80
		}
		pl, err := planOf(g.c, planRequest{op: opBackward, p: p, dt: FP16})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if c.causal && !c.det && !c.forced {
			v := pl.kernels[1]
			want = hopperCausalGroups(p.B*p.Hkv, (p.Nk+v.Bc-1)/v.Bc, g.c.sms)
		}
		if pl.causalGroups != want || c.want != (want > 0) {
			t.Errorf("D%d Nk %d causal %v det %v sm_80 %v: causalGroups %d, want %d", c.d, c.nk, c.causal, c.det, c.forced, pl.causalGroups, want)
		}
	}
}

// TestHopperCausalGroups: none below causalGroupsMinTc key blocks; from
// there between 1 and the pairs, each group at least 2·SMs/Tc pairs (the
// whole batch where it has fewer), and as many groups as that allows.
func TestHopperCausalGroups(t *testing.T) {
	for _, sms := range []int{114, 132} {
		for bhs := 1; bhs <= 300; bhs++ {
			for tc := 1; tc <= 200; tc++ {
				g := hopperCausalGroups(bhs, tc, sms)
				if tc < causalGroupsMinTc {
					if g != 0 {
						t.Fatalf("hopperCausalGroups(%d pairs, Tc %d, %d SMs) = %d, want 0 (lightest first)", bhs, tc, sms, g)
					}
					continue
				}
				per := (2*sms + tc - 1) / tc
				if g < 1 || g > bhs || g > 1 && bhs/g < per || bhs/(g+1) >= per {
					t.Fatalf("hopperCausalGroups(%d pairs, Tc %d, %d SMs) = %d (groups of %d, want at least %d)", bhs, tc, sms, g, bhs/g, per)
				}
			}
		}
	}
}
