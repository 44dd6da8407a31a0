package flashattn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// bf16ForwardHost is ForwardHost on the bf16 kernels: the host tensors'
// checks (DimsOf, which names the argument at fault, as ForwardHost does),
// UploadBF16, Forward, Download (bf16 -> float32, exact) and the LSE.
func bf16ForwardHost(dev *flashattn.Device) func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
	return func(q, k, v *flashattn.Tensor, o *flashattn.Options) (res *flashattn.Result, err error) {
		if _, err := flashattn.DimsOf(q, k, v); err != nil {
			return nil, err
		}
		var in []*flashattn.DeviceTensor
		defer func() {
			for _, t := range in {
				err = errors.Join(err, t.Free())
			}
		}()
		for _, x := range []*flashattn.Tensor{q, k, v} {
			t, err := dev.UploadBF16(x)
			if err != nil {
				return nil, err
			}
			in = append(in, t)
		}
		r, err := dev.Forward(in[0], in[1], in[2], o)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, r.Free()) }()
		if r.Out.DType() != flashattn.BF16 || r.Kernel.DType != flashattn.BF16 || !strings.Contains(r.Kernel.Symbol, "_bf16") {
			return nil, errors.New("bf16 inputs ran " + r.Kernel.Symbol + ", out " + r.Out.DType().String())
		}
		out, err := r.Out.Download()
		if err != nil {
			return nil, err
		}
		lse, err := r.LSE()
		if err != nil {
			return nil, err
		}
		return &flashattn.Result{Dims: r.Dims, Out: out, LSE: lse, Backend: flashattn.GPU, Reason: r.Kernel.Symbol}, nil
	}
}

// defaultPath is the kernel path dev runs by default (75 or 80).
func defaultPath(t *testing.T, dev *flashattn.Device) int {
	t.Helper()
	k, err := dev.Kernel(flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: dev.HeadDims()[0]}, false)
	if err != nil {
		t.Fatal(err)
	}
	return k.Path
}

// TestGPUConformanceBF16 runs the suite's forward cases on the bf16 kernels
// of the default path, held to the BF16 baseline (bf16 inputs and P, fp32
// accumulation). On a Turing GPU there are none (TestBF16RefusedOnSM75).
func TestGPUConformanceBF16(t *testing.T) {
	dev := openGPU(t)
	if p := defaultPath(t, dev); p < 80 {
		t.Skipf("%s runs the sm_%d path, which has no bf16 kernels", dev.Info(), p)
	}
	b := attntest.Backend{Name: "gpu-bf16", Precision: attntest.BF16, Forward: bf16ForwardHost(dev), Plain: true,
		HeadDims: dev.HeadDims()}
	t.Logf("%s, bf16 forward, head dims %v", dev.Info(), b.HeadDims)
	attntest.Run(t, b)
}

// TestBF16Refusals: what the bf16 forward does not do is a typed error
// before any launch: mixed dtypes, the backward (Device and raw), fp16 bits
// of a bf16 tensor.
func TestBF16Refusals(t *testing.T) {
	dev := openGPU(t)
	if p := defaultPath(t, dev); p < 80 {
		t.Skipf("%s runs the sm_%d path, which has no bf16 kernels", dev.Info(), p)
	}
	x, err := flashattn.Make(flashattn.Shape{B: 1, N: 16, H: 1, D: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range x.Data {
		x.Data[i] = float32(i%7) / 8
	}
	b16, err := dev.UploadBF16(x)
	if err != nil {
		t.Fatal(err)
	}
	defer b16.Free()
	f16, err := dev.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	defer f16.Free()
	var de *flashattn.DataError
	if _, err := dev.Forward(b16, f16, b16, nil); !errors.As(err, &de) || de.Arg != "k" {
		t.Errorf("bf16 q, fp16 k: %v, want a *DataError for k", err)
	}
	if _, err := b16.DownloadFP16(); !errors.As(err, &de) {
		t.Errorf("DownloadFP16 of a bf16 tensor: %v, want a *DataError", err)
	}
	if bits, err := b16.DownloadBF16(); err != nil || bits[9] != flashattn.Float32ToBF16(x.Data[9]) {
		t.Errorf("DownloadBF16: %v", err)
	}
	r, err := dev.Forward(b16, b16, b16, &flashattn.Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	var ue *flashattn.UnsupportedError
	if _, err := dev.Backward(b16, b16, b16, r, b16, &flashattn.Options{Causal: true}); !errors.As(err, &ue) || ue.Feature != "dtype" {
		t.Errorf("bf16 Backward: %v, want an *UnsupportedError for the dtype", err)
	}
	d := flashattn.Dims{B: 1, Nq: 16, Nk: 16, Hq: 1, Hkv: 1, D: 64}
	if _, err := dev.NewRawBackward(d, flashattn.BF16, nil); !errors.As(err, &ue) || ue.Feature != "dtype" {
		t.Errorf("bf16 raw backward plan: %v, want an *UnsupportedError for the dtype", err)
	}
	plan, err := dev.NewRawForward(d, flashattn.BF16, &flashattn.Options{Causal: true})
	if err != nil || plan.Kernel().Symbol != r.Kernel.Symbol {
		t.Errorf("bf16 raw forward plan: %v, want kernel %s", err, r.Kernel.Symbol)
	}
	br, err := dev.BenchForwardBF16(flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 2, Hkv: 2, D: 64}, nil, 1, 3)
	if err != nil || br.Kernel.DType != flashattn.BF16 || br.MedianMs <= 0 {
		t.Errorf("BenchForwardBF16: %+v, %v", br, err)
	}
}

// TestBF16RefusedOnSM75: the Turing path has no bf16 tensor cores, so bf16
// inputs are an *UnsupportedError there (never converted to fp16), for
// Forward, raw plans and the benchmark alike.
func TestBF16RefusedOnSM75(t *testing.T) {
	dev := openGPU(t)
	if err := dev.ForcePath(75); err != nil {
		t.Fatal(err)
	}
	x, err := flashattn.Make(flashattn.Shape{B: 1, N: 8, H: 1, D: 64})
	if err != nil {
		t.Fatal(err)
	}
	b16, err := dev.UploadBF16(x)
	if err != nil {
		t.Fatal(err)
	}
	defer b16.Free()
	d := flashattn.Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 64}
	check := func(what string, err error) {
		t.Helper()
		var ue *flashattn.UnsupportedError
		if !errors.As(err, &ue) || ue.Feature != "dtype" || !strings.Contains(ue.Reason, "sm_75") {
			t.Errorf("%s on the sm_75 path: %v, want an *UnsupportedError for the dtype naming sm_75", what, err)
		}
	}
	_, err = dev.Forward(b16, b16, b16, nil)
	check("Forward", err)
	_, err = dev.NewRawForward(d, flashattn.BF16, nil)
	check("NewRawForward", err)
	_, err = dev.BenchForwardBF16(d, nil, 0, 1)
	check("BenchForwardBF16", err)
}
