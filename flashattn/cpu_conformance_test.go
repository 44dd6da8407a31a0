package flashattn_test

import (
	"fmt"
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
