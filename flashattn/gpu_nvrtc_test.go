package flashattn_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// nvrtcDims is the problem the NVRTC tests time: D 64 (the ladder's), N 4096,
// 16 heads of batch 4 (docs/kernels.md times the ladder at D64, N 4096).
var nvrtcDims = flashattn.Dims{B: 4, Nq: 4096, Nk: 4096, Hq: 16, Hkv: 16, D: 64}

// d64Cases are the conformance cases at D 64 without score modifiers: the
// suite's own and those CasesAt(64) moves there (ragged, causal with rows
// that see no key, GQA and MQA, strided and packed layouts, a sharp scale).
func d64Cases() []attntest.Case {
	var out []attntest.Case
	for _, c := range append(attntest.Cases(), attntest.CasesAt(64)...) {
		if c.D == 64 && !c.Mods() {
			out = append(out, c)
		}
	}
	return out
}

// forwardConformance runs d64Cases forward on what dev's Forward runs now.
func forwardConformance(t *testing.T, dev *flashattn.Device, name string) {
	t.Helper()
	b := deviceBackend(dev, name)
	b.Backward = nil
	b.HeadDims = dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil)
	for _, c := range d64Cases() {
		t.Run(c.Name, func(t *testing.T) { attntest.RunCase(t, b, c) })
	}
}

// benchStats times what dev's Forward runs on nvrtcDims and reads its stats.
func benchStats(t *testing.T, dev *flashattn.Device, what string) (flashattn.BenchResult, flashattn.KernelStats) {
	t.Helper()
	s, err := forwardStats(dev, nvrtcDims, false)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	r, err := dev.Bench(flashattn.OpForward, nvrtcDims, flashattn.FP16, &flashattn.Options{}, flashattn.BenchConfig{Warmup: 5, Reps: 20})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%-30s %7.1f TFLOP/s (median %.3f ms)  %v", what, r.TFLOPS, r.MedianMs, s)
	return r, s
}

// TestGPUNVRTCRung4NoSwizzle is the notebook's exercise: rung 4's source
// with the swizzle removed, compiled by NVRTC on the device's own path and
// on the forced Turing path (compute_75, the driver's JIT), passes the
// forward conformance cases at D 64 and is timed beside the shipped rung 4.
func TestGPUNVRTCRung4NoSwizzle(t *testing.T) {
	dev := openGPU(t)
	needNVRTC(t)
	freshCache(t)
	src := noSwizzle(t)
	for _, path := range []int{0, 75} {
		t.Run(fmt.Sprintf("path%d", path), func(t *testing.T) {
			if err := dev.ForcePath(path); err != nil {
				t.Fatal(err)
			}
			defer dev.ForcePath(0)
			if err := dev.UseRung(4); err != nil {
				t.Fatal(err)
			}
			ship, shipStats := benchStats(t, dev, "shipped rung 4")
			if shipStats.NVRTC || shipStats.Rung != 4 {
				t.Fatalf("shipped rung 4 runs %+v", shipStats)
			}
			b, err := dev.LoadRungSource(4, src)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.ResetRungSource(4)
			wantArch := dev.Info().Arch()
			if path == 75 {
				wantArch = 75
			}
			if b.Arch > wantArch || (path == 75 && b.Arch != 75) || dev.Rung() != 4 || len(b.Kernels) != 2 {
				t.Fatalf("build: compute_%d (device sm_%d, path %d), rung %d, %d kernels", b.Arch, dev.Info().Arch(), path, dev.Rung(), len(b.Kernels))
			}
			for _, k := range b.Kernels {
				t.Logf("NVRTC %s compute_%d: %v", b.NVRTC, b.Arch, k)
				if !k.Loaded || !k.NVRTC || k.Registers == 0 || k.BlocksPerSM < 1 || k.StaticSmemBytes != shipStats.StaticSmemBytes {
					t.Errorf("loaded kernel %+v (shipped static smem %d)", k, shipStats.StaticSmemBytes)
				}
			}
			k, err := forwardKernel(dev, nvrtcDims, true)
			if err != nil || k.Rung != 4 || !k.FromPTX || k.Symbol != "fa2_ladder4_d64_causal" {
				t.Fatalf("Kernel: %+v, %v", k, err)
			}
			forwardConformance(t, dev, fmt.Sprintf("nvrtc-rung4-noswizzle-path%d", path))
			edit, editStats := benchStats(t, dev, "rung 4 without the swizzle")
			if !editStats.NVRTC {
				t.Errorf("edited rung 4 runs %+v", editStats)
			}
			t.Logf("%s path %d: without the swizzle %.2fx the shipped rung 4's time", dev.Info(), path, edit.MedianMs/ship.MedianMs)
			if err := dev.ResetRungSource(4); err != nil {
				t.Fatal(err)
			}
			if s, err := forwardStats(dev, nvrtcDims, false); err != nil || s.NVRTC || dev.RungSourceBuild(4) != nil {
				t.Errorf("after ResetRungSource: %+v, %v", s, err)
			}
		})
	}
}

// TestGPUNVRTCShippedSources: every rung's shipped source through NVRTC
// (not the fatbin) passes the forward cases at D 64, on the device's path
// and the forced Turing path: the run-time compile is the same kernel.
func TestGPUNVRTCShippedSources(t *testing.T) {
	dev := openGPU(t)
	needNVRTC(t)
	last := len(flashattn.Ladder())
	for _, path := range []int{0, 75} {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		for r := 1; r <= last; r++ {
			t.Run(fmt.Sprintf("path%d/rung%d", path, r), func(t *testing.T) {
				b, err := dev.LoadRungSource(r, flashattn.RungSource(r))
				if err != nil {
					t.Fatal(err)
				}
				defer dev.ResetRungSource(r)
				k, _ := b.Kernel(64, false)
				t.Logf("NVRTC %s compute_%d: %v", b.NVRTC, b.Arch, k)
				forwardConformance(t, dev, fmt.Sprintf("nvrtc-rung%d-path%d", r, path))
			})
		}
	}
	if err := dev.ForcePath(0); err != nil {
		t.Fatal(err)
	}
	if err := dev.UseRung(last); err != nil {
		t.Fatal(err)
	}
}

// TestGPUNVRTCSingleBuffer drops the shipped kernel's cp.async double
// buffer (traits.cuh's sm_80 D64 row to one stage): less shared memory per
// CTA, its occupancy and time beside the shipped kernel's, and still
// correct. sm_80+ (the Turing rows have no double buffer).
func TestGPUNVRTCSingleBuffer(t *testing.T) {
	dev := openGPU(t)
	needNVRTC(t)
	if dev.Info().Arch() < 80 {
		t.Skipf("%s: the sm_75 path's rows are single-buffered already", dev.Info())
	}
	last := len(flashattn.Ladder())
	if err := dev.ForcePath(80); err != nil { // the sm_80 kernel, not the Hopper one, on an H100/H200
		t.Fatal(err)
	}
	defer dev.ForcePath(0)
	if err := dev.UseRung(last); err != nil {
		t.Fatal(err)
	}
	ship, shipStats := benchStats(t, dev, "shipped, double buffer")
	traits := flashattn.KernelSource("traits.cuh")
	const row = "X(80, 64, 128, 128, 4, 2, 2, true, 1)"
	edited := strings.Replace(traits, row, "X(80, 64, 128, 128, 4, 1, 1, true, 1)", 1)
	if edited == traits {
		t.Fatalf("traits.cuh has no %q", row)
	}
	b, err := dev.LoadRungFiles(last, map[string]string{"traits.cuh": edited})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.ResetRungSource(last)
	forwardConformance(t, dev, "nvrtc-shipped-single-buffer")
	one, oneStats := benchStats(t, dev, "single buffer (NVRTC)")
	if oneStats.SmemPerCTA() >= shipStats.SmemPerCTA() || !oneStats.NVRTC || oneStats.Symbol != shipStats.Symbol {
		t.Errorf("single buffer %v; shipped %v", oneStats, shipStats)
	}
	t.Logf("%s (NVRTC %s, compute_%d): single buffer %.2fx the double buffer's time", dev.Info(), b.NVRTC, b.Arch, one.MedianMs/ship.MedianMs)
}

// TestGPUNVRTCWrongTileIsCaught: rung 4 told to own 128 query rows with
// its 4 warps of 16 (half the rows never computed) compiles and runs, and
// the conformance check says it is wrong: what the learner sees when Br
// and the warps disagree.
func TestGPUNVRTCWrongTileIsCaught(t *testing.T) {
	dev := openGPU(t)
	needNVRTC(t)
	const tile = "static constexpr int kBr = 64, kBc = 64, kThreads = 128;"
	src := strings.Replace(flashattn.RungSource(4), tile, "static constexpr int kBr = 128, kBc = 64, kThreads = 128;", 1)
	b, err := dev.LoadRungSource(4, src)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.ResetRungSource(4)
	defer dev.UseRung(len(flashattn.Ladder()))
	if k, _ := b.Kernel(64, false); k.Br != 128 || k.Warps != 4 {
		t.Fatalf("tile %+v", k)
	}
	c := attntest.Case{Name: "N300", B: 1, Nq: 300, Nk: 300, Hq: 2, Hkv: 2, D: 64, Seed: 7}
	q, k, v, _, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	res, err := dev.ForwardHost(q, k, v, c.Options())
	if err != nil {
		t.Fatal(err)
	}
	truth := attntest.Reference(q, k, v, nil, false, c.EffectiveScale())
	base := attntest.Baseline(attntest.FP16, q, k, v, nil, false, c.EffectiveScale())
	cmp := attntest.CompareForward(attntest.FP16, truth, base, res)
	if cmp.Pass() {
		t.Fatal("rung 4 with Br 128 and 4 warps of 16 rows passed the check")
	}
	t.Logf("caught: %d mismatches, e.g. %v", len(cmp.Mismatches), cmp.Mismatches[0])
}

// TestGPUNVRTCErrorsKeepTheKernel: a source that does not compile is a
// *CompileError and changes nothing the device runs.
func TestGPUNVRTCErrorsKeepTheKernel(t *testing.T) {
	dev := openGPU(t)
	needNVRTC(t)
	if err := dev.UseRung(4); err != nil {
		t.Fatal(err)
	}
	defer dev.UseRung(len(flashattn.Ladder()))
	before, err := forwardKernel(dev, nvrtcDims, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dev.LoadRungSource(4, flashattn.RungSource(4)+"\nthis is not CUDA;\n")
	var ce *flashattn.CompileError
	if !errors.As(err, &ce) || len(ce.Errors()) == 0 || ce.Errors()[0].File != "ladder/rung4_ldmatrix.cuh" {
		t.Fatalf("LoadRungSource of a broken source: %v", err)
	}
	after, err := forwardKernel(dev, nvrtcDims, false)
	if err != nil || after != before || dev.RungSourceBuild(4) != nil {
		t.Errorf("after a failed load: %+v (before %+v), %v", after, before, err)
	}
}
