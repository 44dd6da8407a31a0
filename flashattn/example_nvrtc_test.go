package flashattn_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goflash/goflash/flashattn"
)

// A notebook cell of tutorial chapter 6's exercises: take rung 4's source,
// remove its swizzle (a Swizzle<64> that stores rows plainly), compile it
// with NVRTC in place of the shipped rung 4, and see its registers, shared
// memory, occupancy and speed beside the shipped one's. The conformance
// check (attntest) runs on it as on any kernel: dev.ForwardHost is its
// Forward.
func ExampleDevice_LoadRungSource() {
	dev, err := flashattn.OpenDevice(0)
	if err != nil {
		fmt.Println(err) // errors.Is(err, flashattn.ErrNoGPU) without a GPU
		return
	}
	defer dev.Close()
	dims := flashattn.Dims{B: 4, Nq: 4096, Nk: 4096, Hq: 16, Hkv: 16, D: 64}
	_ = dev.UseRung(4)
	shipped, _ := dev.Bench(flashattn.OpForward, dims, flashattn.FP16, &flashattn.Options{}, flashattn.BenchConfig{Warmup: 5, Reps: 20})

	src := flashattn.RungSource(4)
	src = strings.Replace(src, "#include \"../gemm.cuh\"\n", `#include "../gemm.cuh"
template <> struct Swizzle<64> {
  static constexpr int kChunks = 8;
  __device__ static int key(int) { return 0; }
  __device__ static int offset(int row, int c) { return row * 64 + (c << 3); }
};
`, 1)
	build, err := dev.LoadRungSource(4, src)
	var ce *flashattn.CompileError
	switch {
	case errors.As(err, &ce):
		fmt.Println(ce) // NVRTC's log, each error's line quoted
		return
	case errors.Is(err, flashattn.ErrNoNVRTC):
		fmt.Println(err) // says what to install
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	k, _ := build.Kernel(64, false)
	fmt.Println(k) // registers, shared memory, CTAs per SM, occupancy
	edited, _ := dev.Bench(flashattn.OpForward, dims, flashattn.FP16, &flashattn.Options{}, flashattn.BenchConfig{Warmup: 5, Reps: 20})
	fmt.Printf("shipped %.1f TFLOP/s, without the swizzle %.1f\n", shipped.TFLOPS, edited.TFLOPS)
	_ = dev.ResetRungSource(4) // the shipped rung 4 again
}
