package flashattn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestGPUModifiedBackwardKernels checks which kernels the backward with a
// window, softcap or ALiBi runs at every head dim of the path (the suite
// checks their values): the modified pair (pre, dkdv_mod, dq_mod) where the
// head dim has the three kernels (Turing's D 256 too); at D 256 on the sm_80
// path, where its single pass fits, the modified single pass (atomic dQ), or
// with Options.Deterministic its ordered twin, whose dQ must then be the same
// bits on every call; else an
// *UnsupportedError. The case (Gemma 2's window and softcap, Nq != Nk, GQA)
// has query blocks whose first visible key block is not the first.
func TestGPUModifiedBackwardKernels(t *testing.T) {
	dev := openGPU(t)
	for _, path := range []int{0, 75} { // the default path, then Turing's kernels from their PTX
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		t.Run("path"+itoa(path), func(t *testing.T) {
			mods, raw := dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, modOptions), dev.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil)
			for _, d := range raw {
				if !slices.Contains(mods, d) {
					t.Errorf("ModBackwardHeadDims(FP16) = %v lacks the modified pair's head dim %d", mods, d)
				}
			}
			if want := slices.Contains(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil), 256); slices.Contains(mods, 256) != want {
				t.Errorf("ModBackwardHeadDims(FP16) = %v; want D 256 in it exactly where it has a backward (the modified pair on Turing, else its single pass; %v)", mods, want)
			}
			for _, d := range dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil) {
				c := attntest.Case{Name: "modbwd", B: 1, Nq: 200, Nk: 333, Hq: 4, Hkv: 2, D: d, Causal: true,
					Window: &flashattn.Window{Left: 100, Right: -1}, Softcap: 30, Seed: 71}
				q, k, v, dO, err := c.Inputs()
				if err != nil {
					t.Fatal(err)
				}
				fwd, err := dev.ForwardHost(q, k, v, c.Options())
				if err != nil {
					t.Fatalf("D %d: forward: %v", d, err)
				}
				for _, det := range []bool{false, true} {
					o := c.Options()
					o.Deterministic = det
					g, err := dev.BackwardHost(q, k, v, fwd.Out, dO, fwd.LSE, o)
					var ue *flashattn.UnsupportedError
					switch {
					case slices.Contains(raw, d):
						if err != nil || !strings.Contains(g.Reason, "fa2_bwd_dkdv_") || strings.Count(g.Reason, "_mod") != 2 {
							t.Errorf("D %d, deterministic %v: %v, ran %q; want the modified pair", d, det, err, reasonOf(g))
						}
					case slices.Contains(mods, d):
						want := map[bool]string{false: "fa2_bwd_dkdvq_", true: "fa2_bwd_dkdvqdet_"}[det]
						if err != nil || !strings.Contains(g.Reason, want) || !strings.Contains(g.Reason, "_mod") || !strings.Contains(g.Reason, "fa2_bwd_dqconv_") {
							t.Errorf("D %d, deterministic %v: %v, ran %q; want the modified single pass %s*_mod", d, det, err, reasonOf(g), want)
						}
						if det && err == nil {
							again, err := dev.BackwardHost(q, k, v, fwd.Out, dO, fwd.LSE, o)
							if err != nil {
								t.Fatal(err)
							}
							for i, x := range [][2]*flashattn.Tensor{{g.DQ, again.DQ}, {g.DK, again.DK}, {g.DV, again.DV}} {
								if !bitsEqual(x[0].Data, x[1].Data) {
									t.Errorf("D %d: the ordered modified single pass's %s differs between two calls", d, []string{"dQ", "dK", "dV"}[i])
								}
							}
						}
					default:
						if !errors.As(err, &ue) {
							t.Errorf("D %d, deterministic %v: %v; want an *UnsupportedError (no modified backward here)", d, det, err)
						}
					}
				}
			}
		})
	}
	if err := dev.ForcePath(0); err != nil {
		t.Fatal(err)
	}
}

func reasonOf(g *flashattn.Grads) string {
	if g == nil {
		return ""
	}
	return g.Reason
}
