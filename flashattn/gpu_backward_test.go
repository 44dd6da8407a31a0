package flashattn_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestGPUBackwardDeterministicRepeats runs the deterministic backward three
// times per shape (fp16, and bf16 on the sm_80 path) and demands the same
// bits in dQ, dK and dV every time. Where the device runs the large single
// pass or the Hopper one it is their ordered twin (bwd_dkdvqdet) where the
// table has one (for the Hopper pass without one, the sm_80 path's), whose
// dQ is added in a fixed order; many key blocks per query block (Nk 2100: 17-33 of them at
// D128), GQA, causal with Nq != Nk both ways and odd lengths make a broken
// order likely to show. Accuracy is the conformance suite's
// (TestGPUConformanceBackward, deterministic).
func TestGPUBackwardDeterministicRepeats(t *testing.T) {
	dev := openGPU(t)
	type run func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error)
	dtypes := map[string]run{"fp16": dev.BackwardHost}
	if defaultPath(t, dev) >= 80 {
		dtypes["bf16"] = bf16BackwardHost(dev)
	}
	shapes := []struct {
		dims   flashattn.Dims
		causal bool
	}{
		{flashattn.Dims{B: 1, Nq: 1000, Nk: 2100, Hq: 8, Hkv: 2, D: 128}, true},
		{flashattn.Dims{B: 1, Nq: 1000, Nk: 2100, Hq: 8, Hkv: 2, D: 128}, false},
		{flashattn.Dims{B: 2, Nq: 777, Nk: 333, Hq: 3, Hkv: 1, D: 128}, true},
		{flashattn.Dims{B: 2, Nq: 97, Nk: 1, Hq: 2, Hkv: 2, D: 128}, false},
		{flashattn.Dims{B: 1, Nq: 513, Nk: 1030, Hq: 4, Hkv: 4, D: 64}, true},
		{flashattn.Dims{B: 1, Nq: 300, Nk: 700, Hq: 4, Hkv: 2, D: 64}, false}, // D64's twin is causal only: the three kernels
	}
	for name, bwd := range dtypes {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%v/causal=%v", name, s.dims, s.causal), func(t *testing.T) {
				d := s.dims
				ks, err := backwardKernels(dev, d, &flashattn.Options{Causal: s.causal, Deterministic: true})
				if err != nil {
					t.Fatal(err)
				}
				def, err := backwardKernels(dev, d, &flashattn.Options{Causal: s.causal})
				if err != nil {
					t.Fatal(err)
				}
				twin := slices.ContainsFunc(backwardTable(def[0].Path), func(k flashattn.KernelInfo) bool {
					return k.Symbol == strings.Replace(def[1].Symbol, "dkdvq_", "dkdvqdet_", 1)
				})
				if def[0].Path == 90 && !twin { // no Hopper ordered twin: the sm_80 path's deterministic backward (large rows here)
					twin = slices.ContainsFunc(flashattn.BackwardKernelTable(90), func(k flashattn.KernelInfo) bool {
						return k.Pass == "bwd_dkdvqdet" && k.HeadDim == d.D && k.Causal == s.causal
					})
					if ks[0].Path != 80 {
						t.Fatalf("deterministic backward runs %+v; want the sm_80 path's", ks)
					}
				}
				if twin != (ks[1].Pass == "bwd_dkdvqdet") {
					t.Fatalf("deterministic backward runs %+v beside the default's %s; want the ordered twin exactly where the table has one (large rows, D64's causal only; the Hopper backward's)", ks, def[1].Symbol)
				}
				q, k, v := flashattn.Random(d.QShape(), 11), flashattn.Random(d.KVShape(), 12), flashattn.Random(d.KVShape(), 13)
				dO := flashattn.Random(d.QShape(), 14)
				o := &flashattn.Options{Causal: s.causal, Deterministic: true}
				r, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: s.causal, Backend: flashattn.GPU})
				if err != nil {
					t.Fatal(err)
				}
				var first *flashattn.Grads
				for i := range 3 {
					g, err := bwd(q, k, v, r.Out, dO, r.LSE, o)
					if err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						first = g
						continue
					}
					sameBits(t, fmt.Sprintf("call %d (%s)", i, ks[1].Symbol), g, first)
				}
			})
		}
	}
}

// sameBits reports each of got's dQ, dK and dV whose bits differ from the
// first call's (want), naming the call by what.
func sameBits(t *testing.T, what string, got, want *flashattn.Grads) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"dQ", got.DQ.Data, want.DQ.Data}, {"dK", got.DK.Data, want.DK.Data}, {"dV", got.DV.Data, want.DV.Data}} {
		if n := countDiff(c.got, c.want); n > 0 {
			t.Errorf("%s: %s differs from the first call's in %d of %d elements", what, c.name, n, len(c.want))
		}
	}
}

// countDiff counts the elements whose bits differ (NaN equals NaN bit for bit).
func countDiff(a, b []float32) int {
	n := 0
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			n++
		}
	}
	return n
}
