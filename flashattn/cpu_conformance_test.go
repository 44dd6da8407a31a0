package flashattn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

func TestConformanceCPUNaive(t *testing.T) {
	attntest.Run(t, attntest.ForBackend(flashattn.CPUNaive))
}

func TestConformanceCPUFlash(t *testing.T) {
	attntest.Run(t, attntest.ForBackend(flashattn.CPUFlash))
}

// TestCPUFlashTiles runs the flash path with tile sizes other than 64 on the
// cases whose lengths make every tile ragged or many tiles straddle the
// diagonal or a window's edges: the block bookkeeping must not depend on
// Br = Bc = 64.
func TestCPUFlashTiles(t *testing.T) {
	want := map[string]bool{"N17-causal": true, "Nq97-Nk17-causal-gqa8": true, "Nq17-Nk97-causal": true,
		"head-major-Nq65-Nk40": true, "odd-D7": true, "Nq17-Nk1-causal": true,
		"window-l16-r8-N97": true, "window-r3-Nq97-Nk17": true, "window-l5-r0-Nq300-Nk130-gqa2": true,
		"window-l0-causal-N33": true, "all-window-softcap-alibi-causal-gqa2": true}
	for _, tile := range [][2]int{{1, 1}, {16, 32}, {7, 13}, {128, 5}} {
		b := attntest.ForBackend(flashattn.CPUFlash)
		fwd, bwd := b.Forward, b.Backward
		with := func(o *flashattn.Options) *flashattn.Options {
			c := *o
			c.BlockQ, c.BlockK, c.Workers = tile[0], tile[1], 3
			return &c
		}
		b.Forward = func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
			return fwd(q, k, v, with(o))
		}
		b.Backward = func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
			return bwd(q, k, v, out, dOut, lse, with(o))
		}
		for _, c := range attntest.Cases() {
			if want[c.Name] {
				t.Run(fmt.Sprintf("Br=%d,Bc=%d/%s", tile[0], tile[1], c.Name), func(t *testing.T) { attntest.RunCase(t, b, c) })
			}
		}
	}
}

// TestScoreModsRandom runs both CPU backends on random small problems with
// random windows, softcaps, ALiBi slopes and tiles, and holds every element
// to the truth's float32 error bound (which, unlike the 2x-baseline rule,
// cannot fail a correct backend by bad luck).
func TestScoreModsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	side := func(n int) int { return r.IntN(n+2) - 1 } // -1 (open) to n
	for it := range 300 {
		hkv := 1 + r.IntN(2)
		d := flashattn.Dims{B: 1 + r.IntN(2), Nq: 1 + r.IntN(40), Nk: 1 + r.IntN(40), Hkv: hkv, Hq: hkv * (1 + r.IntN(3)), D: 1 + r.IntN(24)}
		o := &flashattn.Options{Causal: r.IntN(2) == 0, Scale: 0.1 + r.Float64()*2, BlockQ: 1 + r.IntN(9), BlockK: 1 + r.IntN(9)}
		if r.IntN(3) > 0 {
			o.Window = &flashattn.Window{Left: side(d.Nk), Right: side(d.Nk)}
			if o.Causal && o.Window.Right > 0 {
				o.Window.Right = 0
			}
		}
		if r.IntN(2) == 0 {
			o.Softcap = 0.5 + r.Float64()*10
		}
		if r.IntN(2) == 0 {
			o.ALiBi = attntest.ALiBiSlopes(d.Hq)
		}
		o.Backend = []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash}[it%2]
		q, k, v, dO := flashattn.Random(d.QShape(), uint64(it)), flashattn.Random(d.KVShape(), uint64(it)+1), flashattn.Random(d.KVShape(), uint64(it)+2), flashattn.Random(d.QShape(), uint64(it)+3)
		res, err := flashattn.Forward(q, k, v, o)
		if err != nil {
			t.Fatalf("%+v %+v: %v", d, *o, err)
		}
		g, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatalf("%+v %+v: %v", d, *o, err)
		}
		truth := attntest.ReferenceScores(q, k, v, dO, o.Causal, o.Scale, attntest.ScoresOf(o))
		if !attntest.CheckForwardBound(t, truth, res) || !attntest.CheckBackwardBound(t, truth, g) {
			t.Fatalf("problem %d: %+v window %v options %+v", it, d, o.Window, *o)
		}
	}
}
