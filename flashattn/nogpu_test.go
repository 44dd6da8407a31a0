//go:build goflash_nogpu

package flashattn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/internal/kernels"
)

// TestNoGPUBuild (go test -tags goflash_nogpu): a build without the kernel
// images has empty ones, the GPU backend says why it cannot run with a
// typed error (ErrNoKernels, wrapped with ErrNoGPU) before it touches a
// driver, Auto runs on the CPU and says why, and the CPU backends compute
// as in the default build (within attntest's float32 bound of the float64
// reference).
func TestNoGPUBuild(t *testing.T) {
	if kernels.Embedded {
		t.Fatal("goflash_nogpu build: kernels.Embedded is true")
	}
	for im := range kernels.NumImages {
		if len(im.Bytes()) != 0 || len(im.SM75PTX()) != 0 {
			t.Fatalf("goflash_nogpu build embeds image %s: %d bytes, Turing PTX %d bytes", im.File(), len(im.Bytes()), len(im.SM75PTX()))
		}
	}
	const why = "built without GPU kernels (goflash_nogpu)"
	dev, err := flashattn.OpenDevice(0)
	if dev != nil || !errors.Is(err, flashattn.ErrNoKernels) || !errors.Is(err, flashattn.ErrNoGPU) || !strings.Contains(err.Error(), why) {
		t.Errorf("OpenDevice: %v, %v; want an error wrapping ErrNoKernels and ErrNoGPU saying %q", dev, err, why)
	}
	d := flashattn.Dims{B: 1, Nq: 33, Nk: 47, Hq: 4, Hkv: 2, D: 16}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	if _, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.GPU}); !errors.Is(err, flashattn.ErrNoKernels) {
		t.Errorf("Forward on GPU: %v, want ErrNoKernels", err)
	}
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true})
	if err != nil || res.Backend != flashattn.CPUFlash || !strings.Contains(res.Reason, why) {
		t.Fatalf("Forward on Auto: %v; backend %v, reason %q: want cpu-flash saying %q", err, res.Backend, res.Reason, why)
	}
	truth := attntest.Reference(q, k, v, nil, true, 1/math.Sqrt(float64(d.D)))
	for _, be := range []flashattn.Backend{flashattn.CPUFlash, flashattn.CPUNaive} {
		got, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		if !attntest.CheckForwardBound(t, truth, got) {
			t.Errorf("%v: wrong under goflash_nogpu", be)
		}
	}
}
