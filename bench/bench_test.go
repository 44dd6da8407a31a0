package bench_test

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/bench/benchtest"
	"github.com/goflash/goflash/flashattn"
)

// With GOFLASH_FAKE_SDPA set, the test binary is the "python" that runs
// sdpa.py: it answers as benchtest does.
func TestMain(m *testing.M) {
	if kind := os.Getenv("GOFLASH_FAKE_SDPA"); kind != "" {
		os.Exit(benchtest.Serve(kind, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

var dims = []flashattn.Dims{
	{B: 2, Nq: 64, Nk: 64, Hq: 4, Hkv: 4, D: 32},
	{B: 1, Nq: 128, Nk: 128, Hq: 4, Hkv: 4, D: 32},
}

func spec(emulate string) bench.Spec {
	s := bench.Spec{Reps: 1, Emulate: emulate, Backends: bench.TorchBackends, Directions: []string{bench.DirFwd}}
	for _, d := range dims {
		s.Shapes = append(s.Shapes, bench.ShapeOf(d, true))
	}
	return s
}

func runFake(t *testing.T, kind string, s bench.Spec) (bench.TorchMeta, []bench.Row) {
	t.Helper()
	t.Setenv("GOFLASH_FAKE_SDPA", kind)
	return bench.SDPA{Python: os.Args[0], Script: "sdpa.py"}.Run(t.Context(), s)
}

// ours is a GoFlash GPU row at every shape, at 3e-3 TFLOP/s.
func ours() []bench.Row {
	var rows []bench.Row
	for _, d := range dims {
		rows = append(rows, bench.Row{Impl: bench.ImplGPU, Direction: bench.DirFwd, Shape: bench.ShapeOf(d, true),
			Status: bench.StatusOK, TFLOPs: 3e-3, MS: d.FLOPs(true) / 3e9})
	}
	return rows
}

// What PyTorch answers on a T4: no flash. Every consumer must fall back to
// the memory-efficient backend and say so.
func TestT4AnswerFallsBackToEfficient(t *testing.T) {
	meta, rows := runFake(t, benchtest.T4, spec(bench.EmulateSM75))
	if meta.Status != bench.StatusOK || meta.Device != benchtest.Device || meta.Emulate != bench.EmulateSM75 {
		t.Fatalf("meta %+v", meta)
	}
	if !strings.Contains(meta.Label(), "EMULATING sm75") {
		t.Errorf("label %q does not say it is emulated", meta.Label())
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 2 shapes x 4 backends", len(rows))
	}
	base, ok := bench.ChooseBaseline(rows)
	if !ok || base.Impl != "torch-efficient" || base.Series != bench.SeriesSDPAEfficient ||
		!strings.Contains(base.Label, "memory-efficient (flash unsupported: No available kernel") {
		t.Fatalf("baseline %+v, %v", base, ok)
	}
	sum := strings.Join(bench.TorchSummary(rows), "\n")
	for _, want := range []string{"sdpa-flash: 0 of 2 ran; unsupported: No available kernel",
		"sdpa-cudnn: 0 of 2 ran; unsupported: No available kernel", "sdpa-efficient: 2 of 2 ran", "sdpa-math: 2 of 2 ran"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	all := append(ours(), rows...)
	bench.SortRows(all)
	table := bench.BuildTable(all)
	if len(table) != 2 {
		t.Fatalf("%d table lines", len(table))
	}
	for _, l := range table {
		if l.TorchCell("flash").Status != bench.StatusUnsupported || l.TorchCell("cudnn").Status != bench.StatusUnsupported || l.VsFlash != 0 ||
			l.VsCuDNN != 0 || l.VsEff != 3 || l.VsMath != 12 {
			t.Errorf("line %+v: want flash and cudnn unsupported, 3x efficient, 12x math", l)
		}
	}
}

// Where flash ran, it is the baseline.
func TestFlashIsTheBaselineWhereItRan(t *testing.T) {
	meta, rows := runFake(t, benchtest.OK, spec(""))
	if meta.Status != bench.StatusOK || meta.Emulate != "" || strings.Contains(meta.Label(), "EMULAT") {
		t.Fatalf("meta %+v", meta)
	}
	base, ok := bench.ChooseBaseline(rows)
	if !ok || base.Impl != "torch-flash" || base.Label != "PyTorch SDPA flash" {
		t.Fatalf("baseline %+v", base)
	}
	if _, ok := bench.ChooseBaseline(ours()); ok {
		t.Error("a baseline chosen without PyTorch rows")
	}
}

func TestOutcomes(t *testing.T) {
	meta, rows := runFake(t, benchtest.NoTorch, spec(""))
	if meta.Status != bench.StatusSkipped || rows != nil || !strings.Contains(meta.Reason, "PyTorch is not importable") {
		t.Errorf("no torch: %+v %v", meta, rows)
	}
	meta, _ = bench.SDPA{Python: filepath.Join(t.TempDir(), "no-python"), Script: "sdpa.py"}.Run(t.Context(), spec(""))
	if meta.Status != bench.StatusSkipped || !strings.Contains(meta.Reason, "not found") {
		t.Errorf("no python: %+v", meta)
	}
	meta, _ = runFake(t, "bogus", spec(""))
	if meta.Status != bench.StatusError || !strings.Contains(meta.Reason, `unknown kind "bogus"`) {
		t.Errorf("script error: %+v", meta)
	}
	// A child that prints nothing and fails: an error with its exit status.
	t.Setenv("GOFLASH_FAKE_SDPA", "")
	meta, _ = bench.SDPA{Python: "false", Script: "sdpa.py"}.Run(t.Context(), spec(""))
	if meta.Status != bench.StatusError || !strings.Contains(meta.Reason, "exit status 1") {
		t.Errorf("silent failure: %+v", meta)
	}
	for _, bad := range []bench.Spec{{}, spec("sm70"), {Shapes: spec("").Shapes, Backends: []string{"xformers"}}, {Shapes: spec("").Shapes, Reps: -1},
		{Shapes: spec("").Shapes, DType: "fp32"}} {
		meta, _ := bench.SDPA{Python: "false"}.Run(t.Context(), bad)
		if meta.Status != bench.StatusError || !strings.Contains(meta.Reason, "bad SDPA spec") {
			t.Errorf("spec %+v accepted: %+v", bad, meta)
		}
	}
}

func TestParseOutputChecksSchema(t *testing.T) {
	if _, err := bench.ParseOutput([]byte(`{"schema": "other/1"}`)); err == nil {
		t.Error("wrong schema accepted")
	}
	for _, r := range []string{
		`{"b": 1e9, "hq": 1, "hkv": 1e9, "nq": 1, "nk": 1e9, "d": 1e9, "direction": "decode", "status": "ok", "ms": 1}`,
		`{"b": -1, "hq": 1, "hkv": 1, "nq": 1, "nk": 1, "d": 64, "direction": "fwd", "status": "ok", "ms": 1}`,
		`{"b": 1, "hq": 1, "hkv": 1, "nq": 1, "nk": 1, "d": 64, "direction": "fwd", "status": "ok", "ms": -1}`,
	} {
		if o, err := bench.ParseOutput([]byte(`{"schema": "goflash-sdpa/1", "results": [` + r + `]}`)); err == nil {
			t.Errorf("%s accepted: %+v", r, o.Rows())
		}
	}
	o, err := bench.ParseOutput([]byte(`{"schema": "goflash-sdpa/1", "error": "bad spec: x", "outcome": "error"}`))
	if err != nil || o.Meta().Status != bench.StatusError {
		t.Errorf("%+v %v", o, err)
	}
}

func TestFindScript(t *testing.T) {
	p, err := bench.FindScript("")
	if err != nil || !strings.HasSuffix(p, filepath.FromSlash(bench.ScriptPath)) {
		t.Fatalf("%q %v", p, err)
	}
	if _, err := bench.FindScript(filepath.Join(t.TempDir(), "none.py")); err == nil {
		t.Error("a missing path accepted")
	}
}

// The real bench/sdpa.py, where python3 exists: its spec checks, its T4
// emulation's wording (which benchtest's T4 answer copies), and the reason
// it keeps from PyTorch's warnings.
func TestRealScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	script, err := bench.FindScript("")
	if err != nil {
		t.Fatal(err)
	}
	s := spec("")
	s.Directions = []string{"sideways"}
	if meta, _ := (bench.SDPA{Python: py, Script: script}).Run(t.Context(), s); meta.Status != bench.StatusError || !strings.Contains(meta.Reason, "bad spec: unknown direction") {
		t.Errorf("bad spec: %+v", meta)
	}
	probe := `import sys; sys.path.insert(0, sys.argv[1]); import sdpa
for b in ("flash", "cudnn"):
    print(sdpa.SM75_REFUSED_ERROR + " (" + sdpa.refusal_reason([sdpa.SM75_REFUSALS[b]]) + ")")
print(sdpa.refusal_reason([
    "Memory efficient kernel not used because: (Triggered internally at a.cpp:1.)",
    "Memory Efficient attention has been runtime disabled. (Triggered internally at b.h:2.)",
    "Flash attention kernel not used because: (Triggered internally at a.cpp:3.)",
    "Flash attention only supports gpu architectures in the range [sm80, sm90]. Attempting to run on a sm 7.5 gpu. (Triggered internally at c.cpp:4.)",
    "cuDNN attention kernel not used because: (Triggered internally at a.cpp:5.)"]))`
	cmd := exec.Command(py, "-B", "-c", probe, filepath.Dir(script))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != benchtest.SM75Reasons["flash"] || lines[1] != benchtest.SM75Reasons["cudnn"] {
		t.Fatalf("sdpa.py's emulated flash and cudnn reasons %q, benchtest's %q", lines, benchtest.SM75Reasons)
	}
	if want := "Flash attention only supports gpu architectures in the range [sm80, sm90]. Attempting to run on a sm 7.5 gpu."; lines[2] != want {
		t.Errorf("reason from warnings %q, want %q", lines[2], want)
	}
	if exec.Command(py, "-c", "import torch").Run() == nil {
		t.Skip("torch is installed: the answer without torch cannot be checked here")
	}
	meta, rows := bench.SDPA{Python: py, Script: script}.Run(t.Context(), spec(bench.EmulateSM75))
	if meta.Status != bench.StatusSkipped || rows != nil || meta.Emulate != bench.EmulateSM75 || !strings.Contains(meta.Reason, "torch") {
		t.Errorf("without torch: %+v", meta)
	}
}

// The forced sm_80 path's line (on an H100/H200, beside the Hopper forward):
// its series name, its place among the other lines (after the sm_75
// path's), and the primary line where it runs without the default one
// (--force-arch 80), before the sm_75 path's.
func TestSM80Line(t *testing.T) {
	if got, want := bench.SeriesName(bench.ImplGPUSM80), bench.SeriesGPUFlash+" (sm_80 path)"; got != want {
		t.Errorf("SeriesName(%s) = %q, want %q", bench.ImplGPUSM80, got, want)
	}
	if i := slices.Index(bench.OtherImpls, bench.ImplGPUSM75); i < 0 || i+1 >= len(bench.OtherImpls) || bench.OtherImpls[i+1] != bench.ImplGPUSM80 {
		t.Errorf("OtherImpls %q: want %s right after %s", bench.OtherImpls, bench.ImplGPUSM80, bench.ImplGPUSM75)
	}
	as := func(impl string, tf float64) []bench.Row {
		rows := ours()
		for i := range rows {
			rows[i].Impl, rows[i].TFLOPs = impl, tf
		}
		return rows
	}
	_, torch := runFake(t, benchtest.OK, spec(""))
	for _, tc := range []struct {
		rows   [][]bench.Row
		ours   string
		others []string
	}{
		{[][]bench.Row{as(bench.ImplGPUSM80, 2e-3), torch}, bench.ImplGPUSM80, nil},
		{[][]bench.Row{as(bench.ImplGPUSM75, 1e-3), as(bench.ImplGPUSM80, 2e-3)}, bench.ImplGPUSM80, []string{bench.ImplGPUSM75}},
		{[][]bench.Row{as(bench.ImplGPUSM80, 2e-3), ours(), as(bench.ImplGPUSM75, 1e-3), torch}, bench.ImplGPU, []string{bench.ImplGPUSM75, bench.ImplGPUSM80}},
		{[][]bench.Row{as(bench.ImplCPUFlash, 1e-5), as(bench.ImplGPUSM75, 1e-3)}, bench.ImplGPUSM75, []string{bench.ImplCPUFlash}},
		{[][]bench.Row{as(bench.ImplCPUNaive, 1e-6), as(bench.ImplCPUFlash, 1e-5)}, bench.ImplCPUFlash, []string{bench.ImplCPUNaive}},
	} {
		var all []bench.Row
		for _, r := range tc.rows {
			all = append(all, r...)
		}
		bench.SortRows(all)
		table := bench.BuildTable(all)
		if len(table) != len(dims) {
			t.Fatalf("%d table lines, want %d", len(table), len(dims))
		}
		for _, l := range table {
			var others []string
			for _, c := range l.Others {
				others = append(others, c.Impl)
			}
			if l.Ours.Impl != tc.ours || !slices.Equal(others, tc.others) {
				t.Errorf("ours %s, others %q; want %s, %q", l.Ours.Impl, others, tc.ours, tc.others)
			}
			hasTorch := slices.ContainsFunc(all, func(r bench.Row) bool { return strings.HasPrefix(r.Impl, bench.ImplTorchPref) })
			if hasTorch && (len(l.Torch) != len(bench.TorchBackends) || l.VsFlash <= 0) {
				t.Errorf("%s against SDPA: %+v", tc.ours, l)
			}
		}
	}
}

// TestDecodeBytes: a decode call reads every K and V entry once in fp16:
// Llama-3-8B's 8 kv heads of 128 at 32k entries are 128 MiB, read in 28 us
// at 4.79 TB/s (the numbers worked by hand, not by the code under test).
func TestDecodeBytes(t *testing.T) {
	s := bench.Shape{B: 1, Hq: 32, Hkv: 8, Nq: 1, Nk: 32768, D: 128}
	if got := s.KVBytes(); got != 134217728 {
		t.Errorf("KVBytes %d, want 2 (K, V) x 2 bytes x 32768 x 8 x 128 = 134217728", got)
	}
	if got := bench.DecodeTBps(s, 0.028); math.Abs(got-4.7935) > 1e-3 {
		t.Errorf("DecodeTBps(28 us) = %v, want 4.7935", got)
	}
}

// Every implementation a run writes has its series name; an unknown one is
// its own name.
func TestSeriesName(t *testing.T) {
	want := map[string]string{
		bench.ImplGPU:      bench.SeriesGPUFlash,
		bench.ImplGPUSM75:  "gpu-flash (sm_75 path)",
		bench.ImplGPUSM80:  "gpu-flash (sm_80 path)",
		bench.ImplGPUDet:   "gpu-flash (deterministic)",
		bench.ImplCPUFlash: bench.SeriesCPUFlash,
		bench.ImplCPUNaive: bench.SeriesCPUNaive,
		"torch-flash":      bench.SeriesSDPAFlash,
		"torch-cudnn":      bench.SeriesSDPACuDNN,
		"torch-efficient":  bench.SeriesSDPAEfficient,
		"torch-math":       bench.SeriesSDPAMath,
		"someone-else":     "someone-else",
	}
	for _, be := range bench.TorchBackends {
		if _, ok := want[bench.ImplTorchPref+be]; !ok {
			t.Errorf("TorchBackends has %q, which this test does not name", be)
		}
	}
	seen := map[string]string{}
	for impl, name := range want {
		if got := bench.SeriesName(impl); got != name {
			t.Errorf("SeriesName(%q) = %q, want %q", impl, got, name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%s and %s share the series %q", impl, other, name)
		}
		seen[name] = impl
	}
}

// bench sits below viz: it must not import it (viz colours bench's series
// and turns its rows into chart points).
func TestBenchDoesNotImportViz(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/goflash/goflash/bench").CombinedOutput()
	if err != nil && strings.Contains(string(out), "import cycle") {
		t.Fatalf("bench and viz import each other:\n%s", out)
	}
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/goflash/goflash/viz") {
			t.Fatalf("package bench depends on %s", dep)
		}
	}
}
