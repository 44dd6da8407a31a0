package flashattn_test

import (
	"math"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestCPUWorkersBitIdentical: a job's result depends only on its index, so
// every worker count gives the same bits, forward and backward, for both
// CPU backends.
func TestCPUWorkersBitIdentical(t *testing.T) {
	d := flashattn.Dims{B: 2, Nq: 150, Nk: 130, Hq: 4, Hkv: 2, D: 24}
	q, k, v, dO := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3), flashattn.Random(d.QShape(), 4)
	for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		var first []uint32
		for _, w := range []int{1, 2, 5} {
			o := &flashattn.Options{Backend: be, Causal: true, Workers: w, BlockQ: 32, BlockK: 16}
			res, err := flashattn.Forward(q, k, v, o)
			if err != nil {
				t.Fatal(err)
			}
			g, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o)
			if err != nil {
				t.Fatal(err)
			}
			var bits []uint32
			for _, xs := range [][]float32{res.Out.Data, res.LSE, g.DQ.Data, g.DK.Data, g.DV.Data} {
				for _, x := range xs {
					bits = append(bits, math.Float32bits(x))
				}
			}
			if first == nil {
				first = bits
			} else if !slices.Equal(first, bits) {
				t.Errorf("%v: Workers=%d differs from Workers=1", be, w)
			}
		}
	}
}
