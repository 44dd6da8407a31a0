package flashattn_test

import (
	"fmt"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// Benchmarks of the CPU backends, B=1, H=4 (GQA 2 groups), D=64: compare
// naive and flash side by side, e.g.
//
//	go test ./flashattn -run XXX -bench 'Forward|Backward' -benchmem
//
// The GFLOP/s metric uses Dims.FLOPs (backward: 2.5x the forward count).
var benchLens = []int{256, 1024, 2048}

func benchProblem(n int) (flashattn.Dims, *flashattn.Tensor, *flashattn.Tensor, *flashattn.Tensor) {
	d := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 4, Hkv: 2, D: 64}
	return d, flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
}

func benchForward(b *testing.B, be flashattn.Backend) {
	for _, n := range benchLens {
		for _, causal := range []bool{false, true} {
			b.Run(fmt.Sprintf("N=%d/causal=%v", n, causal), func(b *testing.B) {
				d, q, k, v := benchProblem(n)
				o := &flashattn.Options{Backend: be, Causal: causal}
				for b.Loop() {
					if _, err := flashattn.Forward(q, k, v, o); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(d.FLOPs(causal)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func benchBackward(b *testing.B, be flashattn.Backend) {
	for _, n := range benchLens {
		for _, causal := range []bool{false, true} {
			b.Run(fmt.Sprintf("N=%d/causal=%v", n, causal), func(b *testing.B) {
				d, q, k, v := benchProblem(n)
				o := &flashattn.Options{Backend: be, Causal: causal}
				res, err := flashattn.Forward(q, k, v, o)
				if err != nil {
					b.Fatal(err)
				}
				dO := flashattn.Random(d.QShape(), 4)
				for b.Loop() {
					if _, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2.5*d.FLOPs(causal)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func BenchmarkForwardNaive(b *testing.B)  { benchForward(b, flashattn.CPUNaive) }
func BenchmarkForwardFlash(b *testing.B)  { benchForward(b, flashattn.CPUFlash) }
func BenchmarkBackwardNaive(b *testing.B) { benchBackward(b, flashattn.CPUNaive) }
func BenchmarkBackwardFlash(b *testing.B) { benchBackward(b, flashattn.CPUFlash) }
