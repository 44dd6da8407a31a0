package flashattn_test

import (
	"errors"
	"math"
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
		if r.Backend != flashattn.CPUFlash || !strings.Contains(r.Reason, "no usable NVIDIA GPU") {
			t.Fatalf("Auto without a GPU: backend %v, reason %q", r.Backend, r.Reason)
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
	// The backward pass is CPU-only for now: Auto says why, GPU refuses.
	g, err := flashattn.Backward(q, q, q, r.Out, r.Out, r.LSE, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Backend != flashattn.CPUFlash || !strings.Contains(g.Reason, "backward") {
		t.Fatalf("Auto backward: backend %v, reason %q", g.Backend, g.Reason)
	}
	_, err = flashattn.Backward(q, q, q, r.Out, r.Out, r.LSE, &flashattn.Options{Backend: flashattn.GPU})
	var ue *flashattn.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("GPU backward: %v, want *UnsupportedError", err)
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
	if _, err := dev.Kernel(flashattn.Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 40}, false); err == nil {
		t.Fatal("Kernel for D=40 succeeded")
	} else if ue := (*flashattn.UnsupportedError)(nil); !errors.As(err, &ue) || ue.Feature != "head dim" {
		t.Fatalf("Kernel for D=40: %v, want *UnsupportedError for the head dim", err)
	}
	if err := dev.ForceArch(61); err == nil {
		t.Fatal("ForceArch(61) succeeded")
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
	if _, err := dev.UploadFP16(flashattn.Shape{B: 1, N: 2, H: 1, D: 64}, make([]uint16, 5)); err == nil {
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
	base.Data[0] = float32(math.Inf(1))
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
	q, err := dev.UploadFP16(s, make([]uint16, s.Numel()))
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

func benchPaper(b *testing.B, arch int) {
	dev := openGPU(b)
	if err := dev.ForceArch(arch); err != nil {
		b.Fatal(err)
	}
	for _, s := range flashattn.PaperShapes() {
		name := "D" + itoa(s.Dims.D) + "/N" + itoa(s.Dims.Nq)
		if s.Causal {
			name += "/causal"
		}
		b.Run(name, func(b *testing.B) {
			r, err := dev.BenchForward(s.Dims, &flashattn.Options{Causal: s.Causal}, 3, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(r.MedianMs, "ms")
			b.ReportMetric(r.TFLOPS, "TFLOP/s")
			b.ReportMetric(r.HostOverheadUs, "overhead-us")
			b.ReportMetric(r.LaunchUs, "launch-us")
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
