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
	x := Random(Shape{B: 1, N: 2048, H: 2, D: HopperHeadDims()[0]}, 1)
	r, err := d.ForwardHost(x, x, x, nil)
	if err != nil {
		t.Fatalf("forward with an unloadable Hopper cubin: %v", err)
	}
	k, err := firstKernel(d.Kernels(OpForward, r.Dims, FP16, nil))
	if err != nil || k.Path != 80 || d.sm90a || !strings.Contains(r.Reason, "the Hopper kernels did not load") {
		t.Fatalf("ran %+v (%v), reason %q; want the sm_80 kernel and why", k, err, r.Reason)
	}
}

// The forward's launch: a CTA per (query block, batch * head), or for a
// persistent kernel as many CTAs as there are tiles, at most ctas.
func TestFwdConfigPersistent(t *testing.T) {
	f := fieldsOf(problem{Dims: Dims{B: 2, Nq: 1000, Nk: 1000, Hq: 3, Hkv: 3, D: 64}})
	for _, c := range []struct {
		persistent bool
		ctas       int
		want       [3]uint32
	}{
		{false, 132, [3]uint32{8, 6, 1}}, // ceil(1000/128) x 6
		{true, 132, [3]uint32{48, 1, 1}}, // 48 tiles, fewer than the SMs
		{true, 5, [3]uint32{5, 1, 1}},
		{true, 0, [3]uint32{1, 1, 1}},
	} {
		v := kernels.Variant{Br: 128, Warps: 12, SmemBytes: 1 << 10, Persistent: c.persistent}
		cfg := fwdConfig(v, f, c.ctas)
		if cfg.Grid != c.want || cfg.Block != [3]uint32{384, 1, 1} || cfg.SharedMem != 1<<10 {
			t.Errorf("persistent %v, %d CTAs: %+v, want grid %v", c.persistent, c.ctas, cfg, c.want)
		}
	}
	for _, v := range kernels.SM90AVariants() {
		if kernelInfo(v).Persistent != (v.Stage == kernels.Fwd) {
			t.Errorf("%s: the Hopper forwards are persistent (traits.cuh's kPersistent), the backward's kernels not", v.Symbol)
		}
	}
}
