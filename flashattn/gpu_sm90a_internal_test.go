package flashattn

import (
	"errors"
	"strings"
	"testing"

	"github.com/goflash/goflash/internal/kernels"
)

// An sm_90 device whose driver cannot load the Hopper cubin (here: a cubin
// replaced by bytes no driver loads) runs the sm_80 kernels and says why in
// the result, instead of failing the call.
func TestGPUHopperCubinFallback(t *testing.T) {
	good := kernels.SM90ACubin
	kernels.SM90ACubin = []byte("\x7fELF not a cubin")
	defer func() { kernels.SM90ACubin = good }()
	d, err := OpenDevice(0)
	if errors.Is(err, ErrNoGPU) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.sm90a {
		t.Skipf("%s does not run the Hopper forward", d.info)
	}
	x := Random(Shape{B: 1, N: 2048, H: 2, D: kernels.SM90AHeadDims()[0]}, 1)
	r, err := d.ForwardHost(x, x, x, nil)
	if err != nil {
		t.Fatalf("forward with an unloadable Hopper cubin: %v", err)
	}
	k, err := d.Kernel(r.Dims, false)
	if err != nil || k.Path != 80 || d.sm90a || !strings.Contains(r.Reason, "the Hopper kernels did not load") {
		t.Fatalf("ran %+v (%v), reason %q; want the sm_80 kernel and why", k, err, r.Reason)
	}
}
