package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/bench/benchtest"
	"github.com/goflash/goflash/flashattn"
)

// fakeGPU stands in for a CUDA device so that the GPU code paths of bench
// and check run on any machine: its "kernels" are the CPU flash backend, its
// timings fixed rates (forward 100 TFLOP/s on its own path, 70 on the forced
// sm_80 path of an sm_90 device, 40 on the forced sm_75 path; backward half
// that). arch is its compute capability (0: 90, an H100/H200); broken[path]
// corrupts the outputs of that path; noBackward plays a device without
// backward kernels; noGate a driver without stream memory operations (its
// times include the first launch).
type fakeGPU struct {
	arch       int
	path       int
	uses       []int
	broken     map[int]bool
	closed     bool
	noBackward bool
	noGate     bool
	badKernels map[int]bool      // the kernel table of that path lists a D64 kernel that fails to load
	nanOut     map[int]bool      // that path's forward writes a NaN
	brokenBF16 bool              // bf16 calls compute wrong results
	dtypes     []flashattn.DType // the dtype of each Forward call
	mods       []scoreMods       // the modifiers each Bench call was given
	rung       int               // the ladder rung UseRung selected (0: the shipped kernels)
	rungSrc    string            // its edited source ("" when shipped); one containing "BROKEN" computes wrong results
}

func (f *fakeGPU) cc() int {
	if f.arch == 0 {
		return 90
	}
	return f.arch
}

func (f *fakeGPU) Meta() DeviceMeta {
	a := f.cc()
	return DeviceMeta{Kind: "gpu", Name: "Fake GPU", Arch: a, Capability: fmt.Sprintf("%d.%d", a/10, a%10), Memory: 80 << 30, Driver: "000.00 (CUDA 13.0)"}
}

// Use accepts the paths a device of f's arch does: 0, 75, and 80 on sm_80+.
func (f *fakeGPU) Use(path int) error {
	if path != 0 && path != 75 && (path != 80 || f.cc() < 80) {
		return &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "kernel path", Value: fmt.Sprint(path), Reason: "fake"}
	}
	if path != f.path {
		f.path = path
		f.uses = append(f.uses, path)
	}
	return nil
}

// UseRung selects a rung; the rate of a rung r below the shipped kernel
// (fakeLadder of them) is r/fakeLadder of the path's.
func (f *fakeGPU) UseRung(path, rung int, src string) (func(), error) {
	if err := f.Use(path); err != nil {
		return nil, err
	}
	if rung < 1 || rung > len(flashattn.Ladder()) {
		return nil, &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "ladder rung", Value: fmt.Sprint(rung), Reason: "fake"}
	}
	if strings.Contains(src, "NOCOMPILE") {
		return nil, errors.New("fake: rung.cuh(3): error: identifier \"NOCOMPILE\" is undefined")
	}
	f.rung, f.rungSrc = rung, src
	return func() { f.rung, f.rungSrc = 0, "" }, nil
}

func (f *fakeGPU) KernelStats(c Case) (flashattn.KernelStats, error) {
	regs := 40 + 8*f.rung
	if f.rungSrc != "" {
		regs++
	}
	return flashattn.KernelStats{KernelInfo: flashattn.KernelInfo{Symbol: fmt.Sprintf("fake_rung%d", f.rung), Registers: regs, HeadDim: c.Dims.D, Causal: c.Causal},
		Loaded: true, NVRTC: f.rungSrc != "", StaticSmemBytes: 16 << 10, BlocksPerSM: 4, WarpsPerSM: 16, Occupancy: 0.25}, nil
}

func (f *fakeGPU) HasBackward() (bool, string) {
	if f.noBackward {
		return false, "fake: no backward kernels on this device"
	}
	return true, ""
}

func (f *fakeGPU) Bench(c Case, dir string, path int, deterministic bool, dt flashattn.DType, mods scoreMods, warmup, reps int) Row {
	f.mods = append(f.mods, mods)
	d := c.Dims
	row := Row{Impl: gpuImplName(path, f.cc()), Direction: dir, Shape: bench.ShapeOf(d, c.Causal), FLOPs: d.FLOPs(c.Causal)}
	rate := map[int]float64{0: 100, 75: 40, 80: 100}[path]
	if path == 80 && f.cc() == 90 {
		rate = 70 // the sm_80 kernels beside the Hopper forward
	}
	if n := len(flashattn.Ladder()); f.rung > 0 {
		rate *= float64(f.rung) / float64(n)
	}
	if dir == dirDecode { // 4 TB/s (2.8 on the forced sm_80 path, 1.6 on the sm_75 path)
		row.Status, row.MS = statusOK, float64(row.KVBytes())/(rate/25*1e12)*1e3
		row.TFLOPs, row.TBps = row.FLOPs/(row.MS*1e-3)/1e12, bench.DecodeTBps(row.Shape, row.MS)
		return row
	}
	if dir != dirFwd {
		row.FLOPs = map[string]float64{dirBwd: 0, dirFwdBwd: row.FLOPs}[dir] + d.BackwardFLOPs(c.Causal)
		rate /= 2
		if deterministic {
			rate *= 0.8 // the backward without atomics
		}
		if ok, why := f.HasBackward(); !ok || d.D == 256 {
			row.Status, row.Reason = statusUnsupported, orDefault(why, "fake: no D=256 backward kernel")
			return row
		}
	}
	if err := f.Use(path); err != nil {
		return failed(row, err)
	}
	if dt == flashattn.BF16 && (path == 75 || f.cc() < 80) {
		row.Status, row.Reason = statusUnsupported, "fake: bf16 needs the sm_80 path"
		return row
	}
	row.Status, row.TFLOPs, row.MS = statusOK, rate, row.FLOPs/(rate*1e12)*1e3
	row.Kernel = fmt.Sprintf("fake_fwd_d%d", d.D)
	if dt == flashattn.BF16 {
		row.Kernel += "_bf16"
	}
	if dir == dirFwdBwd { // one call: the forward at twice the backward's rate, then the backward
		row.MS = (d.FLOPs(c.Causal)/(2*rate) + d.BackwardFLOPs(c.Causal)/rate) / 1e12 * 1e3
		row.TFLOPs = row.FLOPs / (row.MS * 1e-3) / 1e12
	}
	row.ExtraBytes = 4 * int64(d.LSELen())
	row.LaunchTimed = f.noGate
	return row
}

func (f *fakeGPU) Kernels(path int) ([]KernelRow, error) {
	if err := f.Use(path); err != nil {
		return nil, err
	}
	var out []KernelRow
	for _, d := range []int{32, 64} {
		for _, causal := range []bool{false, true} {
			if f.badKernels[path] && d == 64 && !causal {
				out = append(out, KernelRow{KernelInfo: flashattn.KernelInfo{HeadDim: d}, Error: "fake: CUDA_ERROR_INVALID_PTX"})
				continue
			}
			out = append(out, KernelRow{KernelInfo: flashattn.KernelInfo{HeadDim: d, Causal: causal, Symbol: fmt.Sprintf("fake_fwd_d%d_%d", d, path), Path: max(path, 80), Br: 64, Bc: 64, Warps: 4, SmemBytes: 32 << 10, BinaryArch: 90, FromPTX: path == 75}})
		}
	}
	return out, nil
}

func (f *fakeGPU) Forward(q, k, v *flashattn.Tensor, causal bool, path int, dt flashattn.DType) (*flashattn.Result, error) {
	if err := f.Use(path); err != nil {
		return nil, err
	}
	f.dtypes = append(f.dtypes, dt)
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: causal, Backend: flashattn.CPUFlash})
	if err == nil && (f.broken[path] || dt == flashattn.BF16 && f.brokenBF16 || strings.Contains(f.rungSrc, "BROKEN")) {
		res.Out.Data[len(res.Out.Data)/2] += 0.5
	}
	if err == nil && f.nanOut[path] {
		res.Out.Data[0] = float32(math.NaN())
	}
	return res, err
}

// Backward is the CPU flash backward; a broken path corrupts dQ.
func (f *fakeGPU) Backward(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool, path int, dt flashattn.DType) (*flashattn.Grads, error) {
	if err := f.Use(path); err != nil {
		return nil, err
	}
	if ok, why := f.HasBackward(); !ok {
		return nil, &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "backward", Value: "", Reason: why}
	}
	g, err := flashattn.Backward(q, k, v, out, dOut, lse, &flashattn.Options{Causal: causal, Backend: flashattn.CPUFlash})
	if err == nil && (f.broken[path] || dt == flashattn.BF16 && f.brokenBF16) {
		g.DQ.Data[len(g.DQ.Data)/2] += 0.5
	}
	return g, err
}

func (f *fakeGPU) Close() { f.closed = true }

// withFakeGPU installs f as GPU 0 for the test.
func withFakeGPU(t *testing.T, f *fakeGPU) {
	t.Helper()
	open, list := openGPU, listGPUs
	t.Cleanup(func() { openGPU, listGPUs = open, list })
	openGPU = func(ordinal int) (gpuDevice, error) {
		if ordinal != 0 {
			return nil, fmt.Errorf("%w: fake has GPU 0 only", flashattn.ErrNoGPU)
		}
		return f, nil
	}
	listGPUs = func() ([]DeviceMeta, error) { return []DeviceMeta{f.Meta()}, nil }
}

func TestBenchOnGPUPaperSweepWithTorchAndSM75(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	dir, script := fakeSDPA(t, "ok")
	code, stdout, stderr := runCLI(t, "bench", "--compare-torch", "--with-sm75", "--direction", "both", "--reps", "1", "--warmup", "0",
		"--out", dir, "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !f.closed || !slices.Equal(f.uses, []int{75}) {
		t.Errorf("device closed %t, kernel paths switched %v (want one switch, to 75)", f.closed, f.uses)
	}
	res := readBench(t, dir)
	if res.Device.Name != "Fake GPU" || res.Settings.Reps != 1 {
		t.Errorf("device %+v settings %+v", res.Device, res.Settings)
	}
	// The FA2 paper sweep: 24 shapes, each fwd, bwd and fwdbwd.
	if len(res.Table) != 72 {
		t.Fatalf("%d table lines, want 72", len(res.Table))
	}
	for _, l := range res.Table {
		// Others: the deterministic backward's line, then the forced sm_75 path.
		if l.B*l.Nq != 16384 || l.Hq*l.D != 2048 || l.Ours.Impl != implGPU || len(l.Others) != 2 || l.Others[0].Impl != implGPUDet ||
			l.Others[1].Impl != implGPUSM75 || len(l.Torch) != len(bench.TorchBackends) {
			t.Fatalf("line %+v", l)
		}
		switch l.Direction {
		case dirFwd:
			if l.Ours.Status != statusOK || !near(l.VsFlash, 100/2e-3) || !near(l.VsEff, 100/1e-3) || !near(l.Others[0].TFLOPs, 100) ||
				!near(l.Others[1].TFLOPs, 40) {
				t.Errorf("fwd line %+v", l)
			}
		case dirBwd:
			if l.Ours.Status != statusOK || !near(l.Ours.TFLOPs, 50) || !near(l.Others[0].TFLOPs, 40) || !near(l.Others[1].TFLOPs, 20) ||
				l.VsFlash <= 0 || l.Torch[0].Status != statusOK {
				t.Errorf("bwd line %+v", l)
			}
		default: // fwdbwd: timed as one call (the fake: 3.5 / (1/100 + 2.5/50) TFLOP/s)
			if l.Ours.Status != statusOK || !near(l.Ours.TFLOPs, 3.5/(1./100+2.5/50)) {
				t.Errorf("%s line %+v", l.Direction, l)
			}
		}
	}
	for _, r := range res.Rows {
		if r.Direction == dirFwdBwd && r.Derived {
			t.Errorf("GPU fwdbwd row derived from fwd + bwd, want it timed: %+v", r)
		}
	}
	for _, want := range []string{"gpu-sm75", "vs flash"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "no GPU backward") {
		t.Errorf("output claims no GPU backward on a device that has one:\n%s", stdout)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "bench.html"))
	for _, want := range []string{"Speedup over PyTorch SDPA flash", "Extra memory of one forward call, D = 128", "gpu-flash (sm_75 path)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestBenchNoGPUBackward: on a device without backward kernels the bwd rows
// say unsupported, with the reason, and a note says so.
func TestBenchNoGPUBackward(t *testing.T) {
	f := &fakeGPU{noBackward: true}
	withFakeGPU(t, f)
	code, stdout, stderr := runCLI(t, "bench", "--direction", "bwd", "--seqlens", "1024", "--headdims", "64", "--causal", "false",
		"--reps", "1", "--warmup", "0", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "no GPU backward pass (fake: no backward kernels on this device)") || !strings.Contains(stdout, statusUnsupported) {
		t.Errorf("output:\n%s", stdout)
	}
}

// benchOneShape runs `bench --json` on fake GPU f for one forward shape
// (N 1024, D 64, not causal, one rep), with extra flags, and decodes it.
func benchOneShape(t *testing.T, f *fakeGPU, extra ...string) BenchResult {
	t.Helper()
	withFakeGPU(t, f)
	args := append([]string{"bench", "--seqlens", "1024", "--headdims", "64", "--causal", "false",
		"--reps", "1", "--warmup", "0", "--out", t.TempDir(), "--json"}, extra...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var res BenchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBenchWithSM80OnHopper: on an sm_90 GPU --with-sm80 adds the forced
// sm_80 path's line beside the default (Hopper) one, after the sm_75 path's,
// beside SDPA's backends, in the table, the terminal and the report.
func TestBenchWithSM80OnHopper(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	dir, script := fakeSDPA(t, "ok")
	code, stdout, stderr := runCLI(t, "bench", "--compare-torch", "--with-sm80", "--with-sm75", "--seqlens", "1024,2048", "--headdims", "128",
		"--causal", "false", "--reps", "1", "--warmup", "0", "--out", dir, "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// Grouped by path: the default, then 75, then 80.
	if !slices.Equal(f.uses, []int{75, 80}) {
		t.Errorf("kernel paths switched %v, want [75 80]", f.uses)
	}
	res := readBench(t, dir)
	if len(res.Table) != 2 || slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "--with-sm80") }) {
		t.Fatalf("%d table lines, notes %q", len(res.Table), res.Notes)
	}
	for _, l := range res.Table {
		if l.Ours.Impl != implGPU || !near(l.Ours.TFLOPs, 100) || len(l.Others) != 2 || l.Others[0].Impl != implGPUSM75 || !near(l.Others[0].TFLOPs, 40) ||
			l.Others[1].Impl != implGPUSM80 || !near(l.Others[1].TFLOPs, 70) || len(l.Torch) != len(bench.TorchBackends) || l.VsFlash <= 0 || l.VsCuDNN <= 0 {
			t.Errorf("line %+v", l)
		}
	}
	for _, want := range []string{"gpu-sm75", "gpu-sm80", "sdpa flash", "sdpa cudnn", "vs flash"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "bench.html"))
	for _, want := range []string{"gpu-flash (sm_80 path)", "gpu-flash (sm_75 path)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestBenchWithSM80Ignored: --with-sm80 adds no line, and says why, where
// there is no Hopper forward to set the sm_80 path beside (an A100, a T4),
// under --force-arch 75, and with --decode; --force-arch 80 names the GPU
// line after the sm_80 path on an sm_90 GPU only.
func TestBenchWithSM80Ignored(t *testing.T) {
	for _, tc := range []struct {
		arch  int
		extra []string
		note  string // the --with-sm80 note; "" none
		impls []string
		tf    []float64 // the rows' TFLOP/s
	}{
		{80, []string{"--with-sm80"}, "--with-sm80 ignored: sm_80 has no Hopper path; its default is the sm_80 path", []string{implGPU}, []float64{100}},
		{86, []string{"--with-sm80"}, "--with-sm80 ignored: sm_86 has no Hopper path; its default is the sm_80 path", []string{implGPU}, []float64{100}},
		{75, []string{"--with-sm80"}, "--with-sm80 ignored: sm_75 has no sm_80 path", []string{implGPU}, []float64{100}},
		{90, []string{"--with-sm80", "--force-arch", "75"}, "--with-sm80 ignored: --force-arch 75", []string{implGPUSM75}, []float64{40}},
		{90, []string{"--with-sm80"}, "", []string{implGPU, implGPUSM80}, []float64{100, 70}},
		{90, []string{"--with-sm80", "--force-arch", "80"}, "", []string{implGPUSM80}, []float64{70}},
		{90, []string{"--force-arch", "80", "--with-sm75"}, "", []string{implGPUSM80, implGPUSM75}, []float64{70, 40}},
		{80, []string{"--force-arch", "80"}, "", []string{implGPU}, []float64{100}},
	} {
		res := benchOneShape(t, &fakeGPU{arch: tc.arch}, tc.extra...)
		var impls []string
		var tf []float64
		for _, r := range res.Rows {
			impls, tf = append(impls, r.Impl), append(tf, r.TFLOPs)
		}
		var note string
		for _, n := range res.Notes {
			if strings.Contains(n, "--with-sm80") {
				note = n
			}
		}
		if tc.note == "" && note != "" || !strings.HasPrefix(note, tc.note) || !slices.Equal(impls, tc.impls) || !slices.Equal(tf, tc.tf) {
			t.Errorf("sm_%d %v: rows %v at %v TFLOP/s, note %q; want %v at %v, note %q", tc.arch, tc.extra, impls, tf, note, tc.impls, tc.tf, tc.note)
		}
		// The table's primary line is the GPU line (the first row): the
		// forced path's under --force-arch.
		if len(res.Table) != 1 || res.Table[0].Ours.Impl != tc.impls[0] || len(res.Table[0].Others) != len(tc.impls)-1 {
			t.Errorf("sm_%d %v: table %+v, want %s as ours", tc.arch, tc.extra, res.Table, tc.impls[0])
		}
	}
	// Without a GPU the flag is a usage error, as --with-sm75 is.
	code, _, stderr := runCLI(t, "bench", "--backend", "cpu", "--with-sm80", "--seqlens", "64", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--with-sm80") {
		t.Errorf("--with-sm80 on the CPU: exit %d, %q", code, stderr)
	}
}

// TestBenchLaunchTimedNote: where the GPU rows' times include the launch (no
// gate on this driver), a note says so; with the gate, no note.
func TestBenchLaunchTimedNote(t *testing.T) {
	const note = "GoFlash GPU times include the first kernel's launch"
	for _, noGate := range []bool{false, true} {
		res := benchOneShape(t, &fakeGPU{noGate: noGate})
		noted := slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, note) })
		if noted != noGate || len(res.Rows) != 1 || res.Rows[0].LaunchTimed != noGate {
			t.Errorf("noGate %t: notes %q, rows %+v", noGate, res.Notes, res.Rows)
		}
	}
}

func TestBenchForceArchOnGPU(t *testing.T) {
	res := benchOneShape(t, &fakeGPU{}, "--force-arch", "75")
	if len(res.Rows) != 1 || res.Rows[0].Impl != implGPUSM75 || res.Rows[0].TFLOPs != 40 || res.Device.ForcedArch != 75 {
		t.Errorf("rows %+v, device %+v", res.Rows, res.Device)
	}
	code, _, stderr := runCLI(t, "bench", "--force-arch", "86")
	if code != exitUsage || !strings.Contains(stderr, "--force-arch 86") {
		t.Errorf("--force-arch 86: exit %d, %q", code, stderr)
	}
	// A shape beyond the device's memory is refused before anything runs,
	// as too large for this machine (exit 3).
	code, _, stderr = runCLI(t, "bench", "--seqlens", "4000000", "--headdims", "128", "--batch", "1", "--heads", "64")
	if code != exitTooLarge || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "of device memory") {
		t.Errorf("huge shape on the GPU: exit %d, %q", code, stderr)
	}
}

func TestCheckOnGPU(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	code, stdout, stderr := runCLI(t, "check", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var res CheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.GPUs) != 1 || len(res.GPUs[0].Kernels) != 4 || len(res.GPUs[0].SM75) != 4 || res.Failed != 0 {
		t.Fatalf("%+v", res)
	}
	targets := map[string]int{}
	for _, r := range res.Tests {
		targets[r.Target+" "+r.Direction]++
		if want := map[bool]string{false: "fp16", true: "bf16"}[strings.HasSuffix(r.Target, "-bf16")]; r.Precision != want {
			t.Errorf("GPU test held to %s, want %s: %+v", r.Precision, want, r)
		}
	}
	// 2 head dims x 5 cases on each path and in bf16 (the device's own
	// path), forward and backward, and no CPU tests when a GPU was checked.
	if targets["gpu0 fwd"] != 10 || targets["gpu0 bwd"] != 10 || targets["gpu0-sm75 fwd"] != 10 || targets["gpu0-sm75 bwd"] != 10 ||
		targets["gpu0-bf16 fwd"] != 10 || targets["gpu0-bf16 bwd"] != 10 || len(targets) != 6 {
		t.Errorf("tests per target and direction %v", targets)
	}
	if n := len(slices.DeleteFunc(slices.Clone(f.dtypes), func(dt flashattn.DType) bool { return dt != flashattn.BF16 })); n != 10 {
		t.Errorf("%d bf16 forward calls, want 10", n)
	}
	_, text, _ := runCLI(t, "check")
	for _, want := range []string{"GPU 0: Fake GPU, compute capability 9.0", "kernels (Turing sm_75 path, forced through PTX)", "(JIT from PTX)", "60 passed, 0 failed"} {
		if !strings.Contains(text, want) {
			t.Errorf("check output lacks %q:\n%s", want, text)
		}
	}
}

func TestCheckFailsOnWrongGPUResults(t *testing.T) {
	withFakeGPU(t, &fakeGPU{broken: map[int]bool{75: true}})
	code, stdout, stderr := runCLI(t, "check")
	// The broken sm_75 path fails its 10 forward and 10 backward tests.
	if code != exitFailure || !strings.Contains(stderr, "20 of 60 self-tests failed") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "gpu0-sm75") || !strings.Contains(stdout, "FAIL") {
		t.Errorf("failures not shown:\n%s", stdout)
	}
}

// TestCheckBF16: wrong bf16 results fail the check (its 10 forward and 10
// backward bf16 tests), and a Turing GPU, which has no bf16 kernels, gets
// no bf16 tests.
func TestCheckBF16(t *testing.T) {
	withFakeGPU(t, &fakeGPU{brokenBF16: true})
	code, stdout, stderr := runCLI(t, "check")
	if code != exitFailure || !strings.Contains(stderr, "20 of 60 self-tests failed") || !strings.Contains(stdout, "gpu0-bf16") {
		t.Errorf("broken bf16: exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	f := &fakeGPU{arch: 75}
	withFakeGPU(t, f)
	code, stdout, stderr = runCLI(t, "check", "--json")
	var res CheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("sm_75: exit %d, %v, stderr %q", code, err, stderr)
	}
	for _, r := range res.Tests {
		if strings.Contains(r.Target, "bf16") || r.Precision != "fp16" {
			t.Errorf("sm_75 GPU tested in bf16: %+v", r)
		}
	}
	if slices.Contains(f.dtypes, flashattn.BF16) || res.Passed != 20 {
		t.Errorf("sm_75: dtypes %v, %d passed", f.dtypes, res.Passed)
	}
}

// TestCheckFailsOnKernelLoadError: a kernel the table lists that does not
// load is a failed check, not a head dim quietly left untested.
func TestCheckFailsOnKernelLoadError(t *testing.T) {
	withFakeGPU(t, &fakeGPU{badKernels: map[int]bool{75: true}})
	code, stdout, stderr := runCLI(t, "check")
	// D64's 5 cases on the sm_75 path are not run; its load fails instead.
	if code != exitFailure || !strings.Contains(stderr, "1 of 51 self-tests failed") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "gpu0-sm75  load") || !strings.Contains(stdout, "CUDA_ERROR_INVALID_PTX") {
		t.Errorf("the load failure is not shown:\n%s", stdout)
	}
}

// TestCheckJSONWithNaN: a kernel that writes NaN fails the check, and
// --json still prints the whole result (its error figures null), exactly
// when it matters.
func TestCheckJSONWithNaN(t *testing.T) {
	withFakeGPU(t, &fakeGPU{nanOut: map[int]bool{0: true}})
	code, stdout, stderr := runCLI(t, "check", "--json", "--no-sm75")
	var res CheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitFailure || res.Failed == 0 {
		t.Fatalf("exit %d, %v, failed %d; stderr %q\n%s", code, err, res.Failed, stderr, stdout)
	}
	if !strings.Contains(stdout, `"max_err": null`) {
		t.Errorf("no null error figure:\n%s", stdout)
	}
}

// TestDeviceNotThere: --device naming a GPU the driver does not list is an
// error for check and bench, not a CPU run that exits 0.
func TestDeviceNotThere(t *testing.T) {
	withFakeGPU(t, &fakeGPU{})
	if code, _, stderr := runCLI(t, "check", "--device", "3"); code != exitUsage || !strings.Contains(stderr, "--device 3") {
		t.Errorf("check --device 3: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "--device", "3", "--seqlens", "16", "--headdims", "8", "--reps", "1", "--out", t.TempDir()); code == 0 || !strings.Contains(stderr, "--device 3") {
		t.Errorf("bench --device 3: exit %d, %q", code, stderr)
	}
}

// TestCheckPreTuringGPU: a GPU older than sm_75 (a Kaggle P100, say) is
// listed with the library's reason, is not a failure, and the CPU backends
// are self-tested instead.
func TestCheckPreTuringGPU(t *testing.T) {
	open, list := openGPU, listGPUs
	t.Cleanup(func() { openGPU, listGPUs = open, list })
	openGPU = func(ordinal int) (gpuDevice, error) {
		return nil, &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "compute capability", Value: "6.0", Reason: "the kernels need sm_75 or newer"}
	}
	listGPUs = func() ([]DeviceMeta, error) {
		return []DeviceMeta{{Kind: "gpu", Name: "Tesla P100-PCIE-16GB", Arch: 60, Capability: "6.0", Memory: 16 << 30}}, nil
	}
	code, stdout, stderr := runCLI(t, "check")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"Tesla P100", "not usable by GoFlash, which runs on the CPU here", "compute capability 6.0", "self-testing the CPU backends instead", "cpu-flash"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "check", "--json")
	var res CheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, json %v:\n%s", code, err, stdout)
	}
	if len(res.GPUs) != 1 || !res.GPUs[0].Unsupported || res.Failed != 0 || res.Passed == 0 {
		t.Errorf("gpus %+v passed %d failed %d", res.GPUs, res.Passed, res.Failed)
	}
}

// TestFailedOOM: out-of-memory is told by the error's type
// (flashattn.ErrOutOfMemory, from the driver's CUDA_ERROR_OUT_OF_MEMORY;
// *flashattn.MemoryError, the host's limit), not by its words.
func TestFailedOOM(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("flashattn: allocating the LSE on GPU 0: %w", flashattn.ErrOutOfMemory), statusOOM},
		{fmt.Errorf("kernel says: out of memory"), statusError},
		{fmt.Errorf("case: %w", &flashattn.MemoryError{What: "Forward on cpu-naive", Need: 1 << 40, Limit: 1 << 30}), statusOOM},
		{&flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "head dim", Value: "96", Reason: "none"}, statusUnsupported},
	} {
		if got := failed(Row{}, c.err); got.Status != c.want {
			t.Errorf("failed(%v): status %q, want %q", c.err, got.Status, c.want)
		}
	}
}

// TestBenchDTypeBF16: --dtype bf16 times the bf16 kernels (the forced sm_75
// line: unsupported, with the reason) and asks PyTorch for bf16 too; a
// sdpa.py that times fp16 anyway is refused rather than compared; the CPU,
// --decode, --varlen and unknown types are usage errors.
func TestBenchDTypeBF16(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	dir, script := fakeSDPA(t, benchtest.OK)
	code, stdout, stderr := runCLI(t, "bench", "--dtype", "bf16", "--compare-torch", "--with-sm75", "--direction", "both", "--seqlens", "1024",
		"--headdims", "64", "--reps", "1", "--warmup", "0", "--out", dir, "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	res := readBench(t, dir)
	if res.Settings.DType != "bf16" || res.Torch == nil || res.Torch.Status != statusOK || res.Torch.DType != "bf16" {
		t.Errorf("settings %+v, torch %+v; want bf16 on both sides", res.Settings, res.Torch)
	}
	var gpu, sm75 int
	for _, r := range res.Rows {
		switch r.Impl {
		case implGPU, implGPUDet:
			if gpu++; r.Status != statusOK || !strings.HasSuffix(r.Kernel, "_bf16") {
				t.Errorf("%s row %+v: want the bf16 kernel", r.Impl, r)
			}
		case implGPUSM75:
			if sm75++; r.Status != statusUnsupported || !strings.Contains(r.Reason, "bf16") {
				t.Errorf("sm_75 row %+v: want unsupported, bf16 named", r)
			}
		}
	}
	if gpu == 0 || sm75 == 0 || !strings.Contains(stdout, "bf16 inputs") {
		t.Errorf("%d GPU rows, %d sm_75 rows; stdout:\n%s", gpu, sm75, stdout)
	}

	dir, script = fakeSDPA(t, benchtest.FP16Only)
	code, _, stderr = runCLI(t, "bench", "--dtype", "bf16", "--compare-torch", "--seqlens", "1024", "--headdims", "64", "--reps", "1",
		"--warmup", "0", "--out", dir, "--python", os.Args[0], "--sdpa", script)
	res = readBench(t, dir) // the run's exit status is not the point: what it recorded of PyTorch is
	if res.Torch == nil || res.Torch.Status != statusError || !strings.Contains(res.Torch.Reason, "fp16 inputs, not bf16") ||
		slices.ContainsFunc(res.Rows, func(r Row) bool { return strings.HasPrefix(r.Impl, bench.ImplTorchPref) }) {
		t.Errorf("an fp16-only sdpa.py under --dtype bf16: torch %+v, rows %d; want an error and no PyTorch rows", res.Torch, len(res.Rows))
	}

	for _, args := range [][]string{
		{"--dtype", "fp32"},
		{"--dtype", "bf16", "--backend", "cpu"},
		{"--dtype", "bf16", "--decode"},
		{"--dtype", "bf16", "--varlen", "100,200"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench", "--out", t.TempDir()}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--dtype") {
			t.Errorf("bench %v: exit %d, stderr %q; want a usage error naming --dtype", args, code, stderr)
		}
	}
}
