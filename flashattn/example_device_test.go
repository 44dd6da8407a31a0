package flashattn_test

import (
	"fmt"
	"slices"

	"github.com/goflash/goflash/flashattn"
)

// What a device says about a training step's attention before running it:
// whether its head dim runs here in bf16, the kernels the backward runs
// (tiles, registers, occupancy), and how fast the forward and backward run
// together.
func ExampleDevice_Kernels() {
	dev, err := flashattn.OpenDevice(0)
	if err != nil {
		fmt.Println(err) // errors.Is(err, flashattn.ErrNoGPU) without a GPU
		return
	}
	defer dev.Close()
	dims := flashattn.Dims{B: 8, Nq: 2048, Nk: 2048, Hq: 16, Hkv: 4, D: 128}
	o := &flashattn.Options{Causal: true}
	if !slices.Contains(dev.SupportedHeadDims(flashattn.OpForwardBackward, flashattn.BF16, o), dims.D) {
		fmt.Println("no bf16 training step at D", dims.D, "on", dev.Info()) // the Turing path has no bf16
		return
	}
	ks, err := dev.Kernels(flashattn.OpBackward, dims, flashattn.BF16, o)
	if err != nil {
		fmt.Println(err) // an *UnsupportedError says why
		return
	}
	for _, k := range ks {
		fmt.Println(k) // pre, then dK/dV and dQ, or the single pass and its dQ convert
	}
	r, err := dev.Bench(flashattn.OpForwardBackward, dims, flashattn.BF16, o, flashattn.BenchConfig{Warmup: 3, Reps: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("forward+backward: %.3f ms, %.0f TFLOP/s\n", r.MedianMs, r.TFLOPS)
}
