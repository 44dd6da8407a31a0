package flashattn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// openGPU opens device 0, or skips the test when there is none.
func openGPU(t testing.TB) *flashattn.Device {
	t.Helper()
	dev, err := flashattn.OpenDevice(0)
	if errors.Is(err, flashattn.ErrNoGPU) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return dev
}

// modOptions ask for a window: the calls with score modifiers, whose head
// dims SupportedHeadDims lists with them.
var modOptions = &flashattn.Options{Window: &flashattn.Window{Left: 0, Right: -1}}

// forwardKernel is the kernel Forward runs for fp16 dims (causal or not).
func forwardKernel(dev *flashattn.Device, dims flashattn.Dims, causal bool) (flashattn.KernelInfo, error) {
	s, err := forwardStats(dev, dims, causal)
	return s.KernelInfo, err
}

// forwardStats is forwardKernel with the kernel's stats on the device.
func forwardStats(dev *flashattn.Device, dims flashattn.Dims, causal bool) (flashattn.KernelStats, error) {
	ks, err := dev.Kernels(flashattn.OpForward, dims, flashattn.FP16, &flashattn.Options{Causal: causal})
	if err != nil {
		return flashattn.KernelStats{}, err
	}
	return ks[0], nil
}

// backwardKernels are the kernels Backward runs for fp16 dims with o.
func backwardKernels(dev *flashattn.Device, dims flashattn.Dims, o *flashattn.Options) ([]flashattn.KernelInfo, error) {
	ks, err := dev.Kernels(flashattn.OpBackward, dims, flashattn.FP16, o)
	if err != nil {
		return nil, err
	}
	out := make([]flashattn.KernelInfo, len(ks))
	for i, k := range ks {
		out[i] = k.KernelInfo
	}
	return out, nil
}

// backwardTable is the backward kernels of a kernel path: the Hopper
// kernels for path 90 (the Hopper backward's), else BackwardKernelTable's.
func backwardTable(path int) []flashattn.KernelInfo {
	if path == 90 {
		return flashattn.HopperKernelTable()
	}
	return flashattn.BackwardKernelTable(path)
}

func hasGPU() bool {
	_, err := flashattn.Devices()
	return err == nil
}

// Without a GPU every entry point says so with ErrNoGPU, and Auto falls
// back to the CPU with the reason; with one, the same calls succeed.
func TestGPUAbsentOrPresentIsClean(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 1, N: 5, H: 2, D: 64}, 1)
	infos, err := flashattn.Devices()
	if err != nil {
		if !errors.Is(err, flashattn.ErrNoGPU) {
			t.Fatalf("Devices: %v, want ErrNoGPU", err)
		}
		if _, err := flashattn.OpenDevice(0); !errors.Is(err, flashattn.ErrNoGPU) {
			t.Fatalf("OpenDevice: %v, want ErrNoGPU", err)
		}
		if _, err := flashattn.Forward(q, q, q, &flashattn.Options{Backend: flashattn.GPU}); !errors.Is(err, flashattn.ErrNoGPU) {
			t.Fatalf("Forward(GPU): %v, want ErrNoGPU", err)
		}
		r, err := flashattn.Forward(q, q, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		// One short line (the chain, every path tried for the driver, is
		// goflash check's to print).
		if r.Backend != flashattn.CPUFlash || !strings.HasPrefix(r.Reason, "GPU not used: ") || len(r.Reason) > 80 || strings.Contains(r.Reason, "\n") {
			t.Fatalf("Auto without a GPU: backend %v, reason %q (want one short line)", r.Backend, r.Reason)
		}
		t.Logf("no GPU: Auto says %q", r.Reason)
		return
	}
	for _, in := range infos {
		if in.Name == "" || in.Arch() < 30 || in.TotalMem == 0 || in.FreeMem > in.TotalMem || in.DriverVersion < 11000 || in.SMs < 1 {
			t.Errorf("implausible device info %+v", in)
		}
		t.Logf("%s, %d SMs, %d/%d MiB free, driver API %d", in, in.SMs, in.FreeMem>>20, in.TotalMem>>20, in.DriverVersion)
	}
}

func TestGPUAutoAndReasons(t *testing.T) {
	openGPU(t) // skip without a GPU
	q := flashattn.Random(flashattn.Shape{B: 1, N: 33, H: 2, D: 64}, 1)
	r, err := flashattn.Forward(q, q, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Backend != flashattn.GPU || !strings.Contains(r.Reason, "GPU 0: ") || !strings.Contains(r.Reason, "kernel fa2_") {
		t.Fatalf("Auto on a GPU: backend %v, reason %q", r.Backend, r.Reason)
	}
	t.Logf("Auto: %s", r.Reason)
	// The backward pass runs on the GPU too, and says which kernels.
	g, err := flashattn.Backward(q, q, q, r.Out, r.Out, r.LSE, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The three kernels (dK/dV, dQ) or, where its row fits, the single pass and its convert.
	three := strings.Contains(g.Reason, "fa2_bwd_dkdv_") && strings.Contains(g.Reason, "fa2_bwd_dq_")
	single := strings.Contains(g.Reason, "fa2_bwd_dkdvq_") && strings.Contains(g.Reason, "fa2_bwd_dqconv_")
	if g.Backend != flashattn.GPU || !three && !single {
		t.Fatalf("Auto backward: backend %v, reason %q", g.Backend, g.Reason)
	}
	t.Logf("Auto backward: %s", g.Reason)
	// D 256 has forward kernels and a backward (on the sm_80 path its single
	// pass, on Turing the three kernels): where a GPU has no such backward,
	// Auto falls back for it and says why, GPU refuses.
	var ue *flashattn.UnsupportedError
	big := flashattn.Random(flashattn.Shape{B: 1, N: 9, H: 1, D: 256}, 3)
	if gpu := openGPU(t); slices.Contains(gpu.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil), 256) {
		rb, err := flashattn.Forward(big, big, big, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, det := range []bool{false, true} {
			hasBwd := slices.Contains(gpu.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil), 256)
			if det {
				hasBwd = slices.Contains(gpu.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, &flashattn.Options{Deterministic: true}), 256)
			}
			gb, err := flashattn.Backward(big, big, big, rb.Out, rb.Out, rb.LSE, &flashattn.Options{Deterministic: det})
			if err != nil {
				t.Fatal(err)
			}
			onGPU, want := hasBwd, map[bool]string{false: "fa2_bwd_dkdvq_", true: "fa2_bwd_dkdvqdet_"}[det]
			if slices.Contains(gpu.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil), 256) {
				want = "fa2_bwd_dkdv_sm75_d256" // Turing's three kernels, deterministic either way
			}
			if rb.Backend != flashattn.GPU || (gb.Backend == flashattn.GPU) != onGPU ||
				onGPU && !strings.Contains(gb.Reason, want) || !onGPU && (gb.Backend != flashattn.CPUFlash || !strings.Contains(gb.Reason, "head dim 256")) {
				t.Fatalf("Auto, D=256, deterministic %v: forward on %v, backward on %v (%q)", det, rb.Backend, gb.Backend, gb.Reason)
			}
			_, err = flashattn.Backward(big, big, big, rb.Out, rb.Out, rb.LSE, &flashattn.Options{Backend: flashattn.GPU, Deterministic: det})
			if onGPU && err != nil || !onGPU && !errors.As(err, &ue) {
				t.Fatalf("GPU backward, D=256, deterministic %v: %v, want an *UnsupportedError exactly without a D 256 backward here", det, err)
			}
		}
	}
	// A head dim without a kernel: Auto falls back and says so, GPU refuses.
	odd := flashattn.Random(flashattn.Shape{B: 1, N: 8, H: 1, D: 40}, 2)
	r, err = flashattn.Forward(odd, odd, odd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Backend != flashattn.CPUFlash || !strings.Contains(r.Reason, "head dim 40") {
		t.Fatalf("Auto, D=40: backend %v, reason %q", r.Backend, r.Reason)
	}
	if _, err = flashattn.Forward(odd, odd, odd, &flashattn.Options{Backend: flashattn.GPU}); !errors.As(err, &ue) {
		t.Fatalf("GPU, D=40: %v, want *UnsupportedError", err)
	}
}

func TestGPUDeviceErrors(t *testing.T) {
	dev := openGPU(t)
	if _, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 40}, false); err == nil {
		t.Fatal("Kernel for D=40 succeeded")
	} else if ue := (*flashattn.UnsupportedError)(nil); !errors.As(err, &ue) || ue.Feature != "head dim" {
		t.Fatalf("Kernel for D=40: %v, want *UnsupportedError for the head dim", err)
	}
	if err := dev.ForcePath(61); err == nil {
		t.Fatal("ForcePath(61) succeeded")
	}
	q, err := dev.Upload(flashattn.Random(flashattn.Shape{B: 1, N: 16, H: 2, D: 64}, 1))
	if err != nil {
		t.Fatal(err)
	}
	kBad, err := dev.Upload(flashattn.Random(flashattn.Shape{B: 1, N: 16, H: 2, D: 32}, 2))
	if err != nil {
		t.Fatal(err)
	}
	var se *flashattn.ShapeError
	if _, err := dev.Forward(q, kBad, kBad, nil); !errors.As(err, &se) {
		t.Fatalf("mismatched head dims: %v, want *ShapeError", err)
	}
	kGQA, err := dev.Upload(flashattn.Random(flashattn.Shape{B: 1, N: 16, H: 3, D: 64}, 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Forward(q, kGQA, kGQA, nil); !errors.As(err, &se) {
		t.Fatalf("Hq not a multiple of Hkv: %v, want *ShapeError", err)
	}
	if _, err := dev.UploadBits(flashattn.Shape{B: 1, N: 2, H: 1, D: 64}, flashattn.FP16, make([]uint16, 5)); err == nil {
		t.Fatal("UploadFP16 with too few values succeeded")
	}
	if err := kBad.Free(); err != nil {
		t.Fatal(err)
	}
	if err := kBad.Free(); err != nil {
		t.Fatalf("second Free: %v", err)
	}
	if _, err := kBad.Download(); !errors.Is(err, flashattn.ErrFreed) {
		t.Fatalf("Download of a freed tensor: %v, want ErrFreed", err)
	}
	if _, err := dev.Forward(q, kBad, kBad, nil); !errors.Is(err, flashattn.ErrFreed) {
		t.Fatalf("Forward on a freed tensor: %v, want ErrFreed", err)
	}
	// A tensor of another device is refused.
	other := openGPU(t)
	kOther, err := other.Upload(flashattn.Random(flashattn.Shape{B: 1, N: 16, H: 2, D: 64}, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Forward(q, kOther, kOther, nil); err == nil {
		t.Fatal("Forward with a tensor of another Device succeeded")
	}
}

// Upload rounds to fp16 like Float32ToFP16, from any strides, and Download
// gives the values back exactly.
func TestGPUUploadDownload(t *testing.T) {
	dev := openGPU(t)
	s := flashattn.Shape{B: 2, N: 7, H: 3, D: 32}
	base := flashattn.Random(flashattn.Shape{B: 2, N: 7, H: 4, D: 32}, 5)
	base.Data[0] = 65519                                           // rounds to 65504, fp16's largest
	base.Data[1] = 1e-7                                            // subnormal in fp16
	view, err := flashattn.FromStrided(s, base.Strides, base.Data) // heads 0..2 of 4
	if err != nil {
		t.Fatal(err)
	}
	dt, err := dev.Upload(view)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dt.Download()
	if err != nil {
		t.Fatal(err)
	}
	dense := view.Contiguous()
	for i, x := range dense.Data {
		if want := flashattn.FP16ToFloat32(flashattn.Float32ToFP16(x)); got.Data[i] != want {
			t.Fatalf("element %d: %v, want %v", i, got.Data[i], want)
		}
	}
	if got.Shape != s || dt.Shape() != s {
		t.Fatalf("shape %v / %v, want %v", got.Shape, dt.Shape(), s)
	}
}

// Close frees what the device owns: memory comes back even for tensors and
// results never freed, and they report the device closed.
func TestGPUCloseFreesMemory(t *testing.T) {
	keep := openGPU(t) // keeps the primary context, so free memory compares
	free0 := freeMem(t)
	dev, err := flashattn.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	s := flashattn.Shape{B: 4, N: 4096, H: 16, D: 128} // 64 MiB of fp16
	q, err := dev.UploadBits(s, flashattn.FP16, make([]uint16, s.Numel()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := dev.Forward(q, q, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if free1 := freeMem(t); free0-free1 < 2*uint64(2*s.Numel()) {
		t.Fatalf("free memory fell by %d, want >= %d", free0-free1, 4*s.Numel())
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if free2 := freeMem(t); free2+32<<20 < free0 {
		t.Fatalf("after Close %d MiB are still gone", (free0-free2)>>20)
	}
	if _, err := r.LSE(); err == nil {
		t.Fatal("LSE of a closed device's result succeeded")
	}
	if _, err := dev.Upload(flashattn.Random(s, 1)); !errors.Is(err, flashattn.ErrDeviceClosed) {
		t.Fatalf("Upload on a closed device: %v, want ErrDeviceClosed", err)
	}
	if err := q.Free(); err != nil {
		t.Fatalf("Free after Close: %v", err)
	}
	_ = keep
}

func freeMem(t *testing.T) uint64 {
	t.Helper()
	infos, err := flashattn.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return infos[0].FreeMem
}

// Many goroutines share the default device through Auto.
func TestGPUConcurrentForward(t *testing.T) {
	openGPU(t)
	q := flashattn.Random(flashattn.Shape{B: 2, N: 100, H: 4, D: 64}, 7)
	want, err := flashattn.Forward(q, q, q, &flashattn.Options{Backend: flashattn.GPU})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 5 {
				r, err := flashattn.Forward(q, q, q, &flashattn.Options{Backend: flashattn.GPU})
				if err != nil {
					errs <- err
					return
				}
				for i := range r.Out.Data {
					if r.Out.Data[i] != want.Out.Data[i] {
						errs <- errors.New("GPU forward is not deterministic across goroutines")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkGPUForwardPaper times the default kernels on the FA2 paper's
// shapes with CUDA events (run with -test.benchtime=20x: N is the number of
// timed launches per shape).
func BenchmarkGPUForwardPaper(b *testing.B) {
	benchPaper(b, 0)
}

// BenchmarkGPUForwardPaperSM75 does the same for the forced Turing path.
func BenchmarkGPUForwardPaperSM75(b *testing.B) {
	benchPaper(b, 75)
}

// BenchmarkGPUBackwardPaper times the default backward kernels (pre, dK/dV,
// dQ) on the FA2 paper's shapes (TFLOP/s counts 2.5x the forward's FLOPs).
func BenchmarkGPUBackwardPaper(b *testing.B) {
	benchPaperPass(b, 0, true)
}

// BenchmarkGPUBackwardPaperSM75 does the same for the forced Turing path.
func BenchmarkGPUBackwardPaperSM75(b *testing.B) {
	benchPaperPass(b, 75, true)
}

func benchPaper(b *testing.B, path int) { benchPaperPass(b, path, false) }

func benchPaperPass(b *testing.B, path int, backward bool) {
	dev := openGPU(b)
	if err := dev.ForcePath(path); err != nil {
		b.Fatal(err)
	}
	for _, s := range flashattn.PaperShapes() {
		name := "D" + itoa(s.Dims.D) + "/N" + itoa(s.Dims.Nq)
		if s.Causal {
			name += "/causal"
		}
		b.Run(name, func(b *testing.B) {
			bench := dev.BenchForward
			if backward {
				bench = dev.BenchBackward
			}
			r, err := bench(s.Dims, &flashattn.Options{Causal: s.Causal}, 3, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(r.MedianMs, "ms")
			b.ReportMetric(r.TFLOPS, "TFLOP/s")
			b.ReportMetric(r.HostOverheadUs, "overhead-us")
			b.ReportMetric(r.LaunchUs, "launch-us")
			b.ReportMetric(r.BeyondLaunchUs, "beyond-launch-us")
			b.ReportMetric(float64(r.ExtraBytes), "extra-B")
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// Device.Backward checks its arguments with the library's typed errors, and
// its gradients agree with the public API's (same kernels, same bits).
func TestGPUBackwardDevice(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 2, Nq: 70, Nk: 45, Hq: 4, Hkv: 2, D: 64}
	o := &flashattn.Options{Causal: true}
	qh, kh, vh := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	dOh := flashattn.Random(d.QShape(), 4)
	var ts []*flashattn.DeviceTensor
	for _, x := range []*flashattn.Tensor{qh, kh, vh, dOh} {
		dt, err := dev.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, dt)
	}
	q, k, v, dO := ts[0], ts[1], ts[2], ts[3]
	fwd, err := dev.Forward(q, k, v, o)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dev.Backward(q, k, v, fwd, dO, o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := backwardKernels(dev, d, &flashattn.Options{Causal: true}) // the three kernels, or the single pass where its row fits
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Kernels) != 3 || !slices.Equal(g.Kernels, want) || !g.Kernels[1].Causal {
		t.Fatalf("kernels %+v, want %+v", g.Kernels, want)
	}
	out, err := fwd.Out.Download()
	if err != nil {
		t.Fatal(err)
	}
	lse, err := fwd.LSE()
	if err != nil {
		t.Fatal(err)
	}
	api, err := flashattn.Backward(qh, kh, vh, out, dOh, lse, &flashattn.Options{Causal: true, Backend: flashattn.GPU})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dev  *flashattn.DeviceTensor
		host *flashattn.Tensor
	}{{"dQ", g.DQ, api.DQ}, {"dK", g.DK, api.DK}, {"dV", g.DV, api.DV}} {
		got, err := c.dev.Download()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Data, c.host.Data) || got.Shape != c.host.Shape {
			t.Errorf("%s: Device.Backward and flashattn.Backward differ", c.name)
		}
	}
	if err := g.Free(); err != nil {
		t.Fatal(err)
	}

	var se *flashattn.ShapeError
	if _, err := dev.Backward(q, k, v, fwd, k, o); !errors.As(err, &se) || se.Arg != "dOut" {
		t.Errorf("dOut of k's shape: %v, want *ShapeError for dOut", err)
	}
	if _, err := dev.Backward(q, k, v, nil, dO, o); err == nil {
		t.Error("nil forward result accepted")
	}
	other, err := dev.Forward(k, k, k, nil) // a result of another problem
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Backward(q, k, v, other, dO, o); err == nil {
		t.Error("the forward result of another problem accepted")
	}
	var oe *flashattn.OptionError
	if _, err := dev.Backward(q, k, v, fwd, dO, &flashattn.Options{Scale: math.Inf(1)}); !errors.As(err, &oe) {
		t.Errorf("infinite scale: %v, want *OptionError", err)
	}
	// D 256 on the sm_80 path: the single pass where it fits (BackwardHeadDims),
	// never the three kernels, which it has on Turing alone.
	big := flashattn.Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 256}
	var ue *flashattn.UnsupportedError
	if slices.Contains(dev.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil), 256) {
		for _, det := range []bool{false, true} {
			ks, err := backwardKernels(dev, big, &flashattn.Options{Causal: false})
			if det {
				ks, err = backwardKernels(dev, big, &flashattn.Options{Causal: false, Deterministic: true})
			}
			if err != nil || len(ks) != 3 || ks[1].Symbol != "fa2_bwd_dkdv_sm75_d256" || ks[2].Symbol != "fa2_bwd_dq_sm75_d256" {
				t.Errorf("Turing, D=256, deterministic %v: %+v, %v; want the three kernels", det, ks, err)
			}
		}
	} else if slices.Contains(dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil), 256) {
		if ks, err := backwardKernels(dev, big, &flashattn.Options{Causal: false}); slices.Contains(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil), 256) {
			if err != nil || len(ks) != 3 || ks[1].Pass != "bwd_dkdvq" || !strings.HasSuffix(ks[1].Symbol, "_d256_large") {
				t.Errorf("BackwardKernels(D=256): %+v, %v; want the large single pass", ks, err)
			}
			if _, err := dev.Bench(flashattn.OpBackward, big, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 0, Reps: 1}); err != nil {
				t.Errorf("BenchBackward(D=256): %v", err)
			}
		} else if !errors.As(err, &ue) {
			t.Errorf("BackwardKernels(D=256): %v, want *UnsupportedError", err)
		}
		// With Deterministic: the ordered twin where it fits, else none (no three kernels).
		if ks, err := backwardKernels(dev, big, &flashattn.Options{Causal: false, Deterministic: true}); slices.Contains(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, &flashattn.Options{Deterministic: true}), 256) {
			if err != nil || len(ks) != 3 || ks[1].Pass != "bwd_dkdvqdet" || !strings.HasSuffix(ks[1].Symbol, "_d256_large") {
				t.Errorf("BackwardKernelsDeterministic(D=256): %+v, %v; want the large ordered single pass", ks, err)
			}
			if _, err := dev.Bench(flashattn.OpBackward, big, flashattn.FP16, &flashattn.Options{Deterministic: true}, flashattn.BenchConfig{Warmup: 0, Reps: 1}); err != nil {
				t.Errorf("BenchBackward(D=256, deterministic): %v", err)
			}
		} else if !errors.As(err, &ue) {
			t.Errorf("BackwardKernelsDeterministic(D=256): %v, want *UnsupportedError", err)
		}
	}
	if err := fwd.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Backward(q, k, v, fwd, dO, o); !errors.Is(err, flashattn.ErrFreed) {
		t.Errorf("freed forward result: %v, want ErrFreed", err)
	}
	for _, x := range append(ts, other.Out) {
		if err := x.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Free(); err != nil {
		t.Fatal(err)
	}
}

// Repeated backward calls through the public API give their device memory
// back (uploads, the LSE, Di and the gradients are all freed).
func TestGPUBackwardFreesMemory(t *testing.T) {
	openGPU(t)
	d := flashattn.Dims{B: 2, Nq: 1024, Nk: 1024, Hq: 8, Hkv: 8, D: 128}
	q := flashattn.Random(d.QShape(), 1)
	o := &flashattn.Options{Backend: flashattn.GPU}
	r, err := flashattn.Forward(q, q, q, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flashattn.Backward(q, q, q, r.Out, q, r.LSE, o); err != nil {
		t.Fatal(err)
	}
	free0 := freeMem(t)
	for range 5 {
		if _, err := flashattn.Backward(q, q, q, r.Out, q, r.LSE, o); err != nil {
			t.Fatal(err)
		}
	}
	if free1 := freeMem(t); free1+16<<20 < free0 {
		t.Fatalf("5 backward calls kept %d MiB of device memory", (free0-free1)>>20)
	}
}

// The default backward runs FA2's single pass where the device has one
// (sm_80 path, BackwardKernelTable; the Hopper path's, HopperKernelTable),
// Options.Deterministic its ordered twin
// where the device runs the large single pass, else the three kernels; the single pass's dK and dV are still
// bit-reproducible, its dQ accumulator (and the twin's counters) is counted
// in ExtraBytes and freed. (Accuracy: both paths run
// the conformance suite, TestGPUConformanceBackward.)
func TestGPUBackwardPaths(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 2, Nq: 130, Nk: 77, Hq: 4, Hkv: 2, D: 128}
	def, err := backwardKernels(dev, d, &flashattn.Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	det, err := backwardKernels(dev, d, &flashattn.Options{Causal: true, Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	passes := func(ks []flashattn.KernelInfo) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Pass)
		}
		return out
	}
	tab := backwardTable(def[0].Path)
	large := strings.Contains(def[1].Symbol, "_large") // a large row runs where the device's opt-in limit fits it
	single := large || slices.ContainsFunc(tab, func(k flashattn.KernelInfo) bool {
		return k.Pass == "bwd_dkdvq" && k.HeadDim == d.D && !k.Large
	})
	want, wantDet := []string{"bwd_pre", "bwd_dkdv", "bwd_dq"}, []string{"bwd_pre", "bwd_dkdv", "bwd_dq"}
	if single {
		want = []string{"bwd_pre", "bwd_dkdvq", "bwd_dqconv"}
	}
	twin := slices.ContainsFunc(tab, func(k flashattn.KernelInfo) bool { // large rows but D64's have one
		return k.Symbol == strings.Replace(def[1].Symbol, "dkdvq_", "dkdvqdet_", 1)
	})
	if twin {
		wantDet = []string{"bwd_pre", "bwd_dkdvqdet", "bwd_dqconv"}
	}
	if got := passes(det); !slices.Equal(got, wantDet) || det[1].Causal != true || twin && det[2] != def[2] {
		t.Fatalf("deterministic backward runs %+v, want %v (and the default's convert kernel)", det, wantDet)
	}
	if got := passes(def); !slices.Equal(got, want) || !def[1].Causal {
		t.Fatalf("default backward on the sm_%d path runs %+v, want %v", def[0].Path, def, want)
	}
	t.Logf("sm_%d path, D %d: default %v, deterministic %v", def[0].Path, d.D, passes(def), passes(det))
	for _, o := range []*flashattn.Options{{Causal: true}, {Causal: true, Deterministic: true}} {
		r, err := dev.Bench(flashattn.OpBackward, d, flashattn.FP16, o, flashattn.BenchConfig{Warmup: 0, Reps: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := 4 * int64(d.LSELen()) // Di
		if k := r.Kernels[1]; k.Pass == "bwd_dkdvq" || k.Pass == "bwd_dkdvqdet" {
			blocks := (d.Nq + k.Br - 1) / k.Br // the accumulator holds whole query blocks
			switch {
			case k.Path == 90: // and per row LSE and Di, and an int32 turn per query block
				want += 4 * int64(d.B*d.Hq*blocks*(k.Br*(d.D+2)+1))
			case k.Pass == "bwd_dkdvqdet": // and an int32 counter per query block
				want += 4 * int64(d.B*d.Hq*blocks*(k.Br*d.D+1))
			default:
				want += 4 * int64(d.B*d.Hq*blocks*k.Br*d.D)
			}
		}
		if r.ExtraBytes != want || !slices.Equal(r.Kernels, map[bool][]flashattn.KernelInfo{false: def, true: det}[o.Deterministic]) {
			t.Errorf("BenchBackward(%+v): extra bytes %d (want %d), kernels %v", *o, r.ExtraBytes, want, passes(r.Kernels))
		}
		// Forward+backward as one timed call: the forward kernel, then the
		// same backward; the forward's LSE is extra too; FLOPs 3.5x the forward's.
		fb, err := dev.Bench(flashattn.OpForwardBackward, d, flashattn.FP16, o, flashattn.BenchConfig{Warmup: 0, Reps: 2})
		if err != nil {
			t.Fatal(err)
		}
		fk, err := forwardKernel(dev, d, true)
		if err != nil {
			t.Fatal(err)
		}
		wantK := append([]flashattn.KernelInfo{fk}, r.Kernels...)
		if !fb.Backward || !fb.WithForward || !slices.Equal(fb.Kernels, wantK) || fb.Kernel != r.Kernel ||
			fb.ExtraBytes != want+4*int64(d.LSELen()) || fb.MedianMs <= 0 ||
			math.Abs(fb.TFLOPS*fb.MedianMs*1e9/(d.FLOPs(true)+d.BackwardFLOPs(true))-1) > 1e-9 {
			t.Errorf("BenchForwardBackward(%+v) = %+v; want kernels %v, extra bytes %d", *o, fb, passes(wantK), want+4*int64(d.LSELen()))
		}
		if def[0].Path < 80 {
			continue // no bf16 kernels on the Turing path
		}
		// bf16 takes the same path choice, on its own kernels, with the same extra bytes.
		rb, err := dev.Bench(flashattn.OpBackward, d, flashattn.BF16, o, flashattn.BenchConfig{Warmup: 0, Reps: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := passes(rb.Kernels); rb.ExtraBytes != want || !slices.Equal(got, passes(r.Kernels)) || rb.Kernels[1].DType != flashattn.BF16 {
			t.Errorf("BenchBackwardBF16(%+v): extra bytes %d (want %d), kernels %+v", *o, rb.ExtraBytes, want, rb.Kernels)
		}
	}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	dO := flashattn.Random(d.QShape(), 4)
	o := &flashattn.Options{Causal: true, Backend: flashattn.GPU}
	r, err := flashattn.Forward(q, k, v, o)
	if err != nil {
		t.Fatal(err)
	}
	free0 := freeMem(t)
	var first *flashattn.Grads
	for i := range 3 {
		g, err := flashattn.Backward(q, k, v, r.Out, dO, r.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(g.Reason, def[1].Symbol) {
			t.Errorf("reason %q does not name %s", g.Reason, def[1].Symbol)
		}
		if i == 0 {
			first = g
		} else if !slices.Equal(g.DK.Data, first.DK.Data) || !slices.Equal(g.DV.Data, first.DV.Data) {
			t.Errorf("call %d: dK or dV differ from the first call's (each has one owner: they must not)", i)
		}
	}
	if free1 := freeMem(t); free1+16<<20 < free0 {
		t.Fatalf("3 backward calls kept %d MiB of device memory", (free0-free1)>>20)
	}
}

// BenchBackward runs and reports the three kernels (no speed is asserted:
// speed is measured side by side with PyTorch, see kernels/dev).
func TestGPUBenchBackward(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 1, Nq: 300, Nk: 200, Hq: 4, Hkv: 1, D: 96}
	r, err := dev.Bench(flashattn.OpBackward, d, flashattn.FP16, &flashattn.Options{Causal: true}, flashattn.BenchConfig{Warmup: 1, Reps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Backward || len(r.Kernels) != 3 || r.Kernel.Symbol != r.Kernels[1].Symbol || r.Reps != 3 || !(r.MedianMs > 0) ||
		r.ExtraBytes != 4*int64(d.LSELen()) || math.Abs(r.TFLOPS*r.MedianMs*1e9-2.5*d.FLOPs(true)) > 1e-6*d.FLOPs(true) {
		t.Fatalf("BenchBackward: %+v", r)
	}
	if _, err := dev.Bench(flashattn.OpBackward, d, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 0, Reps: 0}); err == nil {
		t.Error("reps 0 accepted")
	}
}

// BenchForward splits its host cost: the enqueue (LaunchUs), the driver's
// bare cuLaunchKernel of the same kernel and parameters (LaunchFloorUs)
// and the difference (BeyondLaunchUs). No speed is asserted; the figures
// come from benchmark runs (README).
func TestGPUBenchLaunchCost(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 1, Nq: 128, Nk: 128, Hq: 1, Hkv: 1, D: 64}
	for _, bench := range []func(flashattn.Dims, *flashattn.Options, int, int) (flashattn.BenchResult, error){dev.BenchForward, dev.BenchBackward} {
		r, err := bench(d, nil, 2, 50)
		if err != nil {
			t.Fatal(err)
		}
		if !(r.LaunchUs > 0) || !(r.LaunchFloorUs > 0) || r.BeyondLaunchUs != r.LaunchUs-r.LaunchFloorUs || !(r.HostOverheadUs > 0) {
			t.Errorf("backward %v: LaunchUs %v, LaunchFloorUs %v, BeyondLaunchUs %v, HostOverheadUs %v",
				r.Backward, r.LaunchUs, r.LaunchFloorUs, r.BeyondLaunchUs, r.HostOverheadUs)
		}
		// Every Linux driver of CUDA 11.7 or newer has stream memory
		// operations, so the timed window holds the kernels alone (not
		// under a CUDA tool: see TestGPUBenchUnderATool).
		if !r.EnqueueHidden && !flashattn.Profiled() {
			t.Errorf("backward %v: the enqueue was timed too (no cuda.Gate on this driver?)", r.Backward)
		}
		t.Logf("backward %v: enqueue %.2f µs = cuLaunchKernel %.2f µs + %.2f µs of GoFlash; host overhead (enqueue to event wait) %.2f µs",
			r.Backward, r.LaunchUs, r.LaunchFloorUs, r.BeyondLaunchUs, r.HostOverheadUs)
	}
}

// TestGPUBenchUnderATool: where a CUDA tool is in the process (Nsight
// Compute, which runs each launch to completion, would wait forever on a
// stream held by the gate) the calls are timed without the gate, and say so;
// each of the tool's variables alone tells. The variables are read at each
// bench; the driver, already loaded, ignores them.
func TestGPUBenchUnderATool(t *testing.T) {
	dev := openGPU(t)
	if flashattn.Profiled() {
		t.Skip("already under a CUDA tool")
	}
	d := flashattn.Dims{B: 1, Nq: 128, Nk: 128, Hq: 1, Hkv: 1, D: 64}
	for _, v := range flashattn.ToolEnv {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, "1")
			for _, op := range []flashattn.Op{flashattn.OpForward, flashattn.OpBackward} {
				r, err := dev.Bench(op, d, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 1, Reps: 5})
				if err != nil {
					t.Fatal(err)
				}
				if r.EnqueueHidden || !(r.MedianMs > 0) {
					t.Errorf("op %d under a tool: EnqueueHidden %t, median %v ms; want false and a time", op, r.EnqueueHidden, r.MedianMs)
				}
			}
		})
	}
	r, err := dev.Bench(flashattn.OpForward, d, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 1, Reps: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !r.EnqueueHidden {
		t.Error("without a tool: EnqueueHidden false, want true")
	}
}

// TestGPUOutOfMemory: a problem beyond the device's memory fails with an
// error wrapping ErrOutOfMemory (q alone is 2^37 - 2^30 fp16 values, 254
// GiB), before anything is copied from the host.
func TestGPUOutOfMemory(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 127, Nq: 1 << 20, Nk: 1 << 20, Hq: 16, Hkv: 16, D: 64}
	_, err := dev.Bench(flashattn.OpForward, d, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 0, Reps: 1})
	if !errors.Is(err, flashattn.ErrOutOfMemory) {
		t.Fatalf("BenchForward(%+v): %v, want an error wrapping ErrOutOfMemory", d, err)
	}
	t.Logf("%v", err)
}
