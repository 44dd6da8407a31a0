package flashattn_test

import (
	"fmt"

	"github.com/goflash/goflash/flashattn"
)

// A fused projection has written packed QKV (B, N, 3, H, D) to the GPU;
// q, k and v are views of that one buffer, passed without a copy. The
// device addresses here are made up, so the example stops after the checks
// that need no GPU; with real ones (from cuMemAlloc, a PyTorch tensor's
// data_ptr(), a PJRT buffer, DeviceTensor.Raw), a plan enqueues the kernel
// on the caller's stream: see the example of RawForward.Enqueue.
func ExampleCheckRawForward() {
	dims := flashattn.Dims{B: 2, Nq: 256, Nk: 256, Hq: 8, Hkv: 8, D: 64}
	packed := flashattn.Shape{B: dims.B, N: dims.Nq, H: 3 * dims.Hq, D: dims.D}
	qkvBytes := flashattn.FP16.Size() * packed.Numel()
	st := packed.ContiguousStrides() // each view reads its own Hq heads of a token's 3*Hq
	const qkv, out, lse = 0x7f2a00000000, 0x7f2a10000000, 0x7f2a20000000
	view := func(part int) flashattn.RawTensor {
		off := flashattn.FP16.Size() * part * dims.Hq * dims.D
		return flashattn.RawTensor{Ptr: qkv + uint64(off), Strides: st, Bytes: qkvBytes - off}
	}
	args := &flashattn.RawForwardArgs{
		Q: view(0), K: view(1), V: view(2),
		Out: flashattn.RawTensor{Ptr: out, Strides: dims.QShape().ContiguousStrides(),
			Bytes: flashattn.FP16.Size() * dims.QShape().Numel()},
		LSE: flashattn.RawBuffer{Ptr: lse, Bytes: dims.LSEBytes()},
	}
	fmt.Println("qkv:", qkvBytes, "bytes, lse:", dims.LSEBytes(), "bytes")
	fmt.Println("packed views:", flashattn.CheckRawForward(dims, flashattn.FP16, args))

	args.V.Bytes -= 2 // a V view that claims its buffer ends 2 bytes early
	fmt.Println(flashattn.CheckRawForward(dims, flashattn.FP16, args))
	// Output:
	// qkv: 1572864 bytes, lse: 16384 bytes
	// packed views: <nil>
	// flashattn: v: the call reaches 1570816 bytes from 0x7f2a00000800, the caller gives 1570814
}
