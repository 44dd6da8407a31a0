package flashattn_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// faultChildEnv runs TestGPUKernelFault's body in the child process that
// the test starts.
const faultChildEnv = "GOFLASH_FAULT_CHILD"

// TestGPUKernelFault: a kernel fault (a launch reading from an address no
// allocation has) is an error wrapping ErrContextLost; every later call on
// that Device, the device behind Forward's GPU backend, and OpenDevice of
// that GPU after Close fail with it at once (no hang, no panic: the driver
// keeps the fault for the process); Auto then runs on the CPU, says why, and
// answers within tolerance.
//
// The fault poisons the GPU's primary context for the whole process, the
// devices behind Forward's GPU backend included, so the body runs in a
// process of its own.
func TestGPUKernelFault(t *testing.T) {
	if os.Getenv(faultChildEnv) != "1" {
		if !hasGPU() {
			t.Skip("no GPU")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPUKernelFault$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), faultChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("child process:\n%s", out)
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestGPUKernelFault")) {
			t.Fatalf("child process: %v", err)
		}
		return
	}
	// Each step must answer, not hang on a faulted GPU.
	within := func(what string, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no answer after 60 s", what)
			return nil
		}
	}
	dims := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 2, Hkv: 2, D: 64}
	q, k, v := flashattn.Random(dims.QShape(), 1), flashattn.Random(dims.KVShape(), 2), flashattn.Random(dims.KVShape(), 3)
	dev, err := flashattn.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	before, err := dev.ForwardHost(q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The device behind Forward's GPU backend, opened before the fault: it
	// shares the primary context, so it is lost too.
	gpu := &flashattn.Options{Backend: flashattn.GPU}
	if _, err := flashattn.Forward(q, k, v, gpu); err != nil {
		t.Fatal(err)
	}

	err = within("the faulting call", func() error { return flashattn.LaunchFault(dev, dims) })
	t.Logf("fault: %v", err)
	if !errors.Is(err, flashattn.ErrContextLost) {
		t.Fatalf("faulting launch: %v, want ErrContextLost", err)
	}
	later := map[string]func() error{
		"ForwardHost": func() error { _, err := dev.ForwardHost(q, k, v, nil); return err },
		"Upload":      func() error { _, err := dev.Upload(q); return err },
		"BenchForward": func() error {
			_, err := dev.Bench(flashattn.OpForward, dims, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 0, Reps: 1})
			return err
		},
	}
	for name, call := range later {
		if err := within(name, call); !errors.Is(err, flashattn.ErrContextLost) {
			t.Errorf("%s after the fault: %v, want ErrContextLost", name, err)
		}
	}
	// Forward's default device fails with it once, and is then closed ...
	if err := within("Forward (GPU backend)", func() error { _, err := flashattn.Forward(q, k, v, gpu); return err }); !errors.Is(err, flashattn.ErrContextLost) {
		t.Errorf("Forward with the GPU backend after the fault: %v, want ErrContextLost", err)
	}
	if err := within("Close", dev.Close); err != nil {
		t.Errorf("Close after the fault: %v", err)
	}
	// ... and the GPU stays lost for this process: OpenDevice says so (the
	// driver refuses a new context), the GPU backend too, and Auto runs on
	// the CPU, giving that reason, with the same answer as before the fault.
	if err := within("OpenDevice after the fault", func() error {
		again, err := flashattn.OpenDevice(0)
		if err == nil {
			again.Close()
		}
		return err
	}); !errors.Is(err, flashattn.ErrContextLost) {
		t.Errorf("OpenDevice after the fault: %v, want ErrContextLost (the driver keeps the fault for the process)", err)
	}
	if err := within("Forward (GPU backend) after Close", func() error { _, err := flashattn.Forward(q, k, v, gpu); return err }); !errors.Is(err, flashattn.ErrContextLost) {
		t.Errorf("Forward with the GPU backend after the fault and Close: %v, want ErrContextLost", err)
	}
	var res *flashattn.Result
	if err := within("Forward (Auto)", func() (err error) { res, err = flashattn.Forward(q, k, v, nil); return err }); err != nil {
		t.Fatalf("Forward with Auto after the fault: %v", err)
	}
	t.Logf("Auto after the fault: %s %s", res.Backend, res.Reason)
	if res.Backend != flashattn.CPUFlash || !strings.Contains(res.Reason, "context lost") {
		t.Errorf("Auto after the fault ran on %s (%q), want the CPU with the fault as the reason", res.Backend, res.Reason)
	}
	scale := 1 / math.Sqrt(float64(dims.D))
	dO := flashattn.Random(dims.QShape(), 4)
	want := attntest.Reference(q, k, v, dO, false, scale)
	attntest.CheckForward(t, attntest.FP16, want, attntest.Baseline(attntest.FP16, q, k, v, dO, false, scale), before)
	attntest.CheckForward(t, attntest.FP32, want, attntest.Baseline(attntest.FP32, q, k, v, dO, false, scale), res)
}
