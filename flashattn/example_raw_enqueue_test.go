package flashattn_test

import (
	"errors"
	"fmt"

	"github.com/goflash/goflash/flashattn"
)

// rawAttention runs the forward pass of q, k and v on dev through the
// raw-pointer API, as a program that owns its device memory and stream
// does: a plan made once, device addresses in, the kernel enqueued on the
// program's stream, the result read when that stream has run it.
// TestGPURawExample checks it against the reference.
func rawAttention(dev *flashattn.Device, q, k, v *flashattn.Tensor, o *flashattn.Options) (res *flashattn.Result, err error) {
	dims, err := flashattn.DimsOf(q, k, v)
	if err != nil {
		return nil, err
	}
	plan, err := dev.NewRawForward(dims, flashattn.FP16, o) // once per problem
	if err != nil {
		return nil, err
	}

	// The program's device memory: GoFlash tensors here (Upload rounds to
	// fp16). Memory from cuMemAlloc or a PyTorch tensor's data_ptr() in the
	// same process passes as a RawTensor{Ptr, Strides, Bytes} of its own.
	var in [3]*flashattn.DeviceTensor
	defer func() {
		for _, t := range in {
			err = errors.Join(err, t.Free())
		}
	}()
	for i, t := range [3]*flashattn.Tensor{q, k, v} {
		if in[i], err = dev.Upload(t); err != nil {
			return nil, err
		}
	}
	// O and the LSE, which the call writes: a device result's buffers.
	dst, err := dev.UploadResultAs(dims, flashattn.New(dims.QShape()), make([]float32, dims.LSELen()), flashattn.FP16)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dst.Free()) }()
	stream, err := dev.NewStream() // or a CUstream of other CUDA code
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stream.Destroy()) }()

	err = plan.Enqueue(stream.Handle(), &flashattn.RawForwardArgs{
		Q: in[0].Raw(), K: in[1].Raw(), V: in[2].Raw(),
		Out: dst.Out.Raw(), LSE: dst.RawLSE(),
	})
	if err != nil {
		return nil, err // every error comes before the launch
	}
	// Enqueue returned once the kernel was queued: the program may do other
	// work here. A kernel fault would be reported by the synchronisation.
	if err := stream.Synchronize(); err != nil {
		return nil, err
	}
	out, err := dst.Out.Download()
	if err != nil {
		return nil, err
	}
	lse, err := dst.LSE()
	if err != nil {
		return nil, err
	}
	return &flashattn.Result{Dims: dims, Out: out, LSE: lse, Backend: flashattn.GPU,
		Reason: "raw " + plan.Kernel().Symbol + " on " + dev.Info().String()}, nil
}

// A raw forward call made for real on the first GPU (without one it says
// so and stops).
func ExampleRawForward_Enqueue() {
	dev, err := flashattn.OpenDevice(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	q := flashattn.Random(flashattn.Shape{B: 1, N: 256, H: 8, D: 64}, 1)
	k := flashattn.Random(flashattn.Shape{B: 1, N: 256, H: 2, D: 64}, 2) // GQA: 8 query heads share 2 kv heads
	v := flashattn.Random(flashattn.Shape{B: 1, N: 256, H: 2, D: 64}, 3)
	res, err := rawAttention(dev, q, k, v, &flashattn.Options{Causal: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason)
	fmt.Println("O", res.Out.Shape, "LSE of row 0:", res.LSE[0])
}
