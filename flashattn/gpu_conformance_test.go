package flashattn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/internal/kernels"
)

// TestGPUConformance runs the suite on the GPU backend through the public
// API (Options.Backend = GPU), forward only, on every head dim with forward
// kernels (TestGPUConformanceBackward covers the backward pass).
func TestGPUConformance(t *testing.T) {
	dev := openGPU(t)
	b := attntest.ForBackend(flashattn.GPU)
	b.Backward, b.BackwardVarlen = nil, nil
	b.HeadDims = dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil)
	b.ModsVarlen = dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions)
	t.Logf("%s, head dims %v", dev.Info(), b.HeadDims)
	attntest.Run(t, b)
}

// TestGPUConformanceBackward runs the suite, forward and backward, through
// the public API on the head dims with backward kernels, on both backward
// paths: the default (the single pass where the device has one; D 256 only
// where its large tile fits) and Options.Deterministic (the three-kernel
// backward, which D 256 has none of; with a window, softcap or ALiBi, D 256
// runs its modified single pass or its ordered twin). For the other head dims
// the forward is refused here (it is covered above), so the suite checks
// that Backward refuses them with an *UnsupportedError. Packed sequences
// too: the varlen three kernels (deterministic either way), at D 256 the
// modified single pass or its ordered twin (the base row's).
func TestGPUConformanceBackward(t *testing.T) {
	dev := openGPU(t)
	for _, det := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "deterministic"}[det], func(t *testing.T) {
			b := attntest.ForBackend(flashattn.GPU)
			b.Name = "gpu-fwd+bwd"
			b.HeadDims = dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil)
			if det {
				b.HeadDims = dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, &flashattn.Options{Deterministic: true})
			}
			b.ModsBackward = dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, modOptions) // the modified pair's, and D 256's modified single pass where it fits
			b.VarlenBackward = dev.SupportedHeadDims(flashattn.OpVarlenBackward, flashattn.FP16, nil)
			b.ModsVarlen = dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions)
			b.Forward = onlyHeadDims(b.HeadDims, "no backward kernels", b.Forward)
			if det {
				b.Name += "-deterministic"
				b.Backward, b.BackwardVarlen = withDeterministic(b.Backward), withDeterministicVarlen(b.BackwardVarlen)
			}
			t.Logf("%s, backward head dims %v", dev.Info(), b.HeadDims)
			attntest.Run(t, b)
		})
	}
}

// onlyHeadDims wraps a backend's forward so that it refuses the head dims
// outside dims (for the reason why), as the suite then expects.
func onlyHeadDims(dims []int, why string, fwd func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error)) func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
	return func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
		if q != nil && !slices.Contains(dims, q.Shape.D) {
			return nil, &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "head dim", Value: itoa(q.Shape.D), Reason: why + " (test wrapper)"}
		}
		return fwd(q, k, v, o)
	}
}

// withDeterministic runs bwd with Options.Deterministic set (on a copy).
func withDeterministic(bwd func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error)) func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
	return func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
		c := flashattn.Options{}
		if o != nil {
			c = *o
		}
		c.Deterministic = true
		return bwd(q, k, v, out, dOut, lse, &c)
	}
}

// TestGPUConformanceSM75 runs the suite on the Turing kernels, compiled by
// the driver from their compute_75 PTX, through the Device API: forward and
// backward at the head dims with backward kernels, forward alone at any
// other (whose backward Backward must refuse with an *UnsupportedError). D
// 256's kernels are forms of their own on Turing (kernels/n8.cuh's forward,
// the backward's column groups in traits.cuh's FA2_BWD_TILES), so every suite
// case runs there too (CasesAt), plain and packed.
func TestGPUConformanceSM75(t *testing.T) {
	dev := openGPU(t)
	if err := dev.ForcePath(75); err != nil {
		t.Fatal(err)
	}
	fwdDims, bwdDims := dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil), dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil)
	var fwdOnly []int
	for _, d := range fwdDims {
		if !slices.Contains(bwdDims, d) {
			fwdOnly = append(fwdOnly, d)
		}
	}
	for _, d := range bwdDims {
		if !slices.Contains(fwdDims, d) {
			t.Fatalf("sm_75 path: backward head dims %v, forward %v; a backward needs its forward", bwdDims, fwdDims)
		}
	}
	k, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: fwdDims[len(fwdDims)-1]}, false)
	if err != nil {
		t.Fatal(err)
	}
	if k.Path != 75 || !k.FromPTX {
		t.Fatalf("forced sm_75 runs %+v", k)
	}
	ks, err := backwardKernels(dev, flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: bwdDims[0]}, &flashattn.Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Path != 75 || !k.FromPTX {
			t.Fatalf("forced sm_75 backward runs %+v", k)
		}
	}
	// Turing has no single pass (its kernels stream through registers, not
	// cp.async): both backward paths are the three-kernel one, which the suite
	// below runs (its determinism check with Deterministic, the rest without).
	for _, d := range bwdDims {
		dims := flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: d}
		def, err1 := backwardKernels(dev, dims, &flashattn.Options{Causal: false})
		det, err2 := backwardKernels(dev, dims, &flashattn.Options{Causal: false, Deterministic: true})
		if err1 != nil || err2 != nil || !slices.Equal(def, det) || def[1].Pass != "bwd_dkdv" {
			t.Fatalf("forced sm_75, D %d: default backward %+v (%v), deterministic %+v (%v); want the same three kernels", d, def, err1, det, err2)
		}
	}
	t.Logf("%s, forced Turing path, head dims %v (backward %v), e.g. %+v and %+v", dev.Info(), fwdDims, bwdDims, k, ks[1])
	// everyCase runs every suite case at D 256 against b, plain and packed.
	everyCase := func(t *testing.T, b attntest.Backend, dims []int) {
		if !slices.Contains(dims, 256) {
			return
		}
		b.ForwardVarlen, b.ModsVarlen = dev.ForwardVarlenHost, dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions)
		if b.Backward != nil {
			b.BackwardVarlen, b.VarlenBackward = dev.BackwardVarlenHost, dev.SupportedHeadDims(flashattn.OpVarlenBackward, flashattn.FP16, nil)
		}
		for _, c := range attntest.CasesAt(256) {
			t.Run(c.Name, func(t *testing.T) { attntest.RunCase(t, b, c) })
		}
		attntest.RunVarlenCases(t, b, attntest.VarlenCasesAt(256))
	}
	t.Run("fwd+bwd", func(t *testing.T) {
		b := deviceBackend(dev, "gpu-sm75")
		b.HeadDims = bwdDims
		b.Forward = onlyHeadDims(bwdDims, "forward-only head dim (the suite's other run)", b.Forward)
		attntest.Run(t, b)
		everyCase(t, b, bwdDims)
	})
	if len(fwdOnly) == 0 {
		return
	}
	t.Run("fwd-only", func(t *testing.T) {
		b := deviceBackend(dev, "gpu-sm75-fwd")
		b.HeadDims = fwdOnly
		b.Forward = onlyHeadDims(fwdOnly, "checked with its backward (the suite's other run)", b.Forward)
		b.Backward, b.ModsBackward = nil, nil
		attntest.Run(t, b)
		everyCase(t, b, fwdOnly)
		for _, d := range fwdOnly {
			c := attntest.Case{Name: "fwd-only", B: 1, Nq: 9, Nk: 9, Hq: 1, Hkv: 1, D: d, Seed: 5}
			q, k, v, dO, err := c.Inputs()
			if err != nil {
				t.Fatal(err)
			}
			res, err := dev.ForwardHost(q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ue *flashattn.UnsupportedError
			if _, err := dev.BackwardHost(q, k, v, res.Out, dO, res.LSE, nil); !errors.As(err, &ue) {
				t.Errorf("Backward at D %d on the sm_75 path: %v, want *UnsupportedError (no Turing kernels)", d, err)
			}
		}
	})
}

// TestGPUConformanceSM80 runs the suite, forward and backward, on the sm_80
// path forced (ForcePath(80)) through the Device API: on an H100/H200 the
// mma.sync forward, which the default path replaces by the Hopper kernels at
// their head dims; elsewhere on sm_80+ the default path again. Turing GPUs
// have no sm_80 path.
func TestGPUConformanceSM80(t *testing.T) {
	dev := openSM80(t)
	b := deviceBackend(dev, "gpu-sm80")
	b.HeadDims = dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil) // every sm_80 head dim where its single pass fits (D 256: A100, H100/H200)
	b.Forward = onlyHeadDims(b.HeadDims, "no backward kernels", b.Forward)
	for _, d := range b.HeadDims {
		k, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: d}, false)
		if err != nil || k.Path != 80 || k.FromPTX {
			t.Fatalf("forced sm_80, D %d: runs %+v (%v)", d, k, err)
		}
	}
	t.Logf("%s, forced sm_80 path, head dims %v", dev.Info(), b.HeadDims)
	attntest.Run(t, b)
}

// TestGPUConformanceSmem99 runs what an sm_86/89 GPU (RTX 30xx/40xx, A10,
// L4) runs: the sm_80 path with 99 KiB of opt-in shared memory per block,
// where the large single-pass rows do not fit, so D 128 and D 256 run their
// base single pass (D 256's: one Q|dO stage, V in registers) and
// Options.Deterministic the three kernels, or at D 256 the base pass's
// ordered twin. On an H100/H200 the same code runs as sm_90 SASS (sm_86/89's
// SASS is compiled from it and checked for spills by internal/kernels'
// tests). The suite, forward and backward, plain, modified and packed, at
// every backward head dim, default and deterministic; every suite and varlen
// case at D 256; the suite again in bf16.
func TestGPUConformanceSmem99(t *testing.T) {
	dev := openSM80(t)
	defer flashattn.SetSharedMemoryOptin(dev, flashattn.SetSharedMemoryOptin(dev, kernels.BaseSmemBytes))
	dims := dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil)
	if !slices.Contains(dims, 256) || !slices.Equal(dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, &flashattn.Options{Deterministic: true}), dims) {
		t.Fatalf("within %d bytes: backward head dims %v, deterministic %v; want both with D 256", kernels.BaseSmemBytes,
			dims, dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, &flashattn.Options{Deterministic: true}))
	}
	for _, d := range dims {
		for _, causal := range []bool{false, true} {
			dd := flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: d}
			def, err1 := backwardKernels(dev, dd, &flashattn.Options{Causal: causal})
			det, err2 := backwardKernels(dev, dd, &flashattn.Options{Causal: causal, Deterministic: true})
			if err1 != nil || err2 != nil {
				t.Fatal(errors.Join(err1, err2))
			}
			for _, k := range append(def, det...) {
				if k.Large || k.SmemBytes > kernels.BaseSmemBytes || k.Path != 80 {
					t.Fatalf("D %d within %d bytes runs %+v", d, kernels.BaseSmemBytes, k)
				}
			}
			if d == 256 && (def[1].Pass != "bwd_dkdvq" || det[1].Pass != "bwd_dkdvqdet") {
				t.Fatalf("D 256 within %d bytes runs %+v and %+v, want its base single pass and its ordered twin", kernels.BaseSmemBytes, def, det)
			}
		}
	}
	t.Logf("%s, sm_80 path within %d bytes, backward head dims %v", dev.Info(), kernels.BaseSmemBytes, dims)
	for _, det := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "deterministic"}[det], func(t *testing.T) {
			b := deviceBackend(dev, "gpu-smem99")
			b.HeadDims = dims
			b.Forward = onlyHeadDims(dims, "no backward kernels", b.Forward)
			b.ForwardVarlen, b.BackwardVarlen = dev.ForwardVarlenHost, dev.BackwardVarlenHost
			b.ModsVarlen, b.VarlenBackward = dev.SupportedHeadDims(flashattn.OpVarlenForward, flashattn.FP16, modOptions), dev.SupportedHeadDims(flashattn.OpVarlenBackward, flashattn.FP16, nil)
			if det {
				b.Name, b.Backward, b.BackwardVarlen = b.Name+"-deterministic", withDeterministic(b.Backward), withDeterministicVarlen(b.BackwardVarlen)
			}
			attntest.Run(t, b)
			for _, c := range attntest.CasesAt(256) {
				t.Run(c.Name, func(t *testing.T) { attntest.RunCase(t, b, c) })
			}
			attntest.RunVarlenCases(t, b, attntest.VarlenCasesAt(256))
		})
	}
	// bf16 (D 128 and 256 run their base single pass's bf16 twins).
	attntest.Run(t, attntest.Backend{Name: "gpu-smem99-bf16", Precision: attntest.BF16, Backward: bf16BackwardHost(dev),
		Forward: onlyHeadDims(dims, "no backward kernels", bf16ForwardHost(dev)), Plain: true, ModsForward: true, HeadDims: dims,
		ModsBackward: dev.SupportedHeadDims(flashattn.OpBackward, flashattn.BF16, modOptions)})
}

// openSM80 opens the GPU with the sm_80 path forced (ForcePath(80)), or
// skips the test on a Turing GPU, which has none.
func openSM80(t *testing.T) *flashattn.Device {
	t.Helper()
	dev := openGPU(t)
	if dev.Info().Arch() < 80 {
		t.Skipf("%s has no sm_80 path", dev.Info())
	}
	if err := dev.ForcePath(80); err != nil {
		t.Fatal(err)
	}
	return dev
}

// deviceBackend runs Forward and Backward on dev through the Device API
// (ForwardHost, BackwardHost: upload, Device.Forward or Device.Backward,
// download).
func deviceBackend(dev *flashattn.Device, name string) attntest.Backend {
	return attntest.Backend{
		Name:      name,
		Precision: attntest.FP16,
		Forward:   dev.ForwardHost,
		Backward:  dev.BackwardHost,
		// Windows, softcap and ALiBi run both ways (the backward on the modified
		// pair's head dims, and D 256's single pass where it fits), not in varlen calls.
		Plain:        true,
		ModsForward:  true,
		ModsBackward: dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, modOptions),
	}
}
