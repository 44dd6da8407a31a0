package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/bench/benchtest"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// With GOFLASH_FAKE_SDPA set, the test binary stands in for
// "python3 bench/sdpa.py" and answers as benchtest does (benchtest.OK: flash
// 2e-3 and efficient 1e-3 TFLOP/s, math skipped; T4; NoTorch), so the
// --compare-torch merge is tested without PyTorch. With GOFLASH_AS_MAIN=1
// it is goflash itself (asMain), for tests that signal a child process.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if kind := os.Getenv("GOFLASH_FAKE_SDPA"); kind != "" {
		os.Exit(benchtest.Serve(kind, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// fakeSDPA makes this test binary answer as bench/sdpa.py with benchtest's
// kind (TestMain): an out directory and a script path to pass as --sdpa
// (any existing file; the fake ignores it), with --python os.Args[0].
func fakeSDPA(t *testing.T, kind string) (dir, script string) {
	t.Helper()
	dir = t.TempDir()
	script = filepath.Join(dir, "sdpa.py")
	if err := os.WriteFile(script, []byte("# fake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLASH_FAKE_SDPA", kind)
	return dir, script
}

// runCLI runs the program in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// readCSV reads a bench.csv whole.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("%s: %d records, %v", path, len(recs), err)
	}
	return recs
}

// readBench returns the BenchResult a goflash bench run wrote to dir's bench.json.
func readBench(t *testing.T, dir string) BenchResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res BenchResult
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	return res
}

func noGPU(t *testing.T) bool {
	t.Helper()
	_, err := listGPUs()
	return err != nil
}

func TestDemoCPUWritesReportAndSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sub", "demo.html")
	code, stdout, stderr := runCLI(t, "demo", "--backend", "cpu", "--sizes", "64,128", "--reps", "1", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"backend: cpu-flash (--backend cpu)",
		`sentence "the cat sat on the mat because it was tired and slept"`,
		"it→cat", "max |err| vs float64",
		"tiling (causal N=256, Br=Bc=32): 8x8 tiles, 28 computed, 8 masked, 28 skipped",
		"report: " + out,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "FAIL") {
		t.Errorf("an accuracy check failed:\n%s", stdout)
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, want := range []string{"<!DOCTYPE html>", "data-goflash-echarts", "Attention weights of the sentence",
		"The tiling schedule", "The online softmax of one row", "Memory", "Speed", "slept"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Self-contained: no script or stylesheet is fetched.
	for _, bad := range []string{`src="http`, `href="http`, `src="//`} {
		if strings.Contains(page, bad) {
			t.Errorf("report fetches something: contains %q", bad)
		}
	}
	if n := strings.Count(page, "echarts.init("); n < 6 {
		t.Errorf("report has %d charts, want at least 6", n)
	}
}

func TestDemoJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "--backend", "cpu", "--sizes", "32,256", "--heads", "2", "--reps", "1", "--json", "--no-report")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var s DemoSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if s.Backend != "cpu-flash" || s.Report != "" || len(s.Random) != 2 || len(s.Memory) != 2 {
		t.Fatalf("summary: backend %q, report %q, %d random, %d memory", s.Backend, s.Report, len(s.Random), len(s.Memory))
	}
	if !s.Sentence.Accuracy.Pass || len(s.Sentence.Tokens) != 12 {
		t.Errorf("sentence: %+v", s.Sentence)
	}
	for i, r := range s.Random {
		if !r.Accuracy.Pass || r.Accuracy.Precision != "fp32" || !(r.Accuracy.MaxErrOut < 1e-5) || r.FlashMS <= 0 || r.NaiveMS <= 0 {
			t.Errorf("random[%d]: %+v", i, r)
		}
	}
	// Measured memory: naive holds N x N scores, flash does not.
	// (At N = 32 flash's fixed tile scratch may well exceed naive's N^2.)
	m := s.Memory[1]
	if m.N != 256 || m.NaiveBytes < 2*4*256*256 || m.FlashBytes >= m.NaiveBytes {
		t.Errorf("memory at N=256: %+v (naive must hold 2 x N^2 float32 = %d bytes, more than flash)", m, 2*4*256*256)
	}
}

func TestSentenceHeadsDoWhatTheCommentsSay(t *testing.T) {
	s, err := loadSentence()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tokens) != 12 || s.Q.Shape != (flashattn.Shape{B: 1, N: 12, H: sentHeads, D: sentHeadDim}) {
		t.Fatalf("%d tokens, q shape %v", len(s.Tokens), s.Q.Shape)
	}
	res, err := flashattn.Forward(s.Q, s.K, s.V, &flashattn.Options{Causal: true, Backend: flashattn.CPUNaive})
	if err != nil {
		t.Fatal(err)
	}
	// Weight of key j for row i from the LSE: exp(scale q.k - LSE).
	weight := func(h, i, j int) float64 {
		var dot float64
		for x := 0; x < sentHeadDim; x++ {
			dot += float64(s.Q.At(0, i, h, x)) * float64(s.K.At(0, j, h, x))
		}
		return expf(dot/sqrtf(sentHeadDim) - float64(res.LSE[res.Dims.LSEIndex(0, h, i)]))
	}
	argmax := func(h, i int) int {
		best := 0
		for j := 0; j <= i; j++ {
			if weight(h, i, j) > weight(h, i, best) {
				best = j
			}
		}
		return best
	}
	cat := 1
	for _, i := range []int{7, 8, 9, 11} { // it, was, tired, slept
		if j := argmax(0, i); j != cat {
			t.Errorf("head 0: %q attends most to %q, want %q", s.Tokens[i], s.Tokens[j], s.Tokens[cat])
		}
	}
	for i := 1; i < len(s.Tokens); i++ {
		if j := argmax(1, i); j != i-1 {
			t.Errorf("head 1: %q (%d) attends most to %q (%d), want the previous token", s.Tokens[i], i, s.Tokens[j], j)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "bench"}, {"demo", "--help"}, {"bench", "--help"}, {"check", "-h"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: goflash") && !strings.Contains(stdout, "Usage:\n  goflash") {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", args, code, stderr, stdout)
		}
	}
	_, stdout, _ := runCLI(t, "bench", "--help")
	for _, flag := range []string{"-batch", "-heads", "-kv-heads", "-seqlens", "-headdims", "-causal", "-direction", "-deterministic",
		"-reps", "-warmup", "-backend", "-force-arch", "-with-sm75", "-with-sm80", "-compare-torch", "-json", "-out",
		"goflash bench --compare-torch --with-sm80   # on an H100/H200"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("bench --help does not mention %s", flag)
		}
	}
}

func TestBadInputIsOneLineUsageError(t *testing.T) {
	cases := []struct {
		args []string
		want string // in the message
	}{
		{[]string{"bench", "--heads", "3", "--kv-heads", "2"}, "multiple of"},
		{[]string{"bench", "--headdims", "0"}, "head dim 0"},
		{[]string{"bench", "--seqlens", "-1"}, "sequence length -1"},
		{[]string{"bench", "--seqlens", "12x"}, "not an integer"},
		{[]string{"bench", "--batch", "-2"}, "--batch"},
		{[]string{"bench", "--direction", "sideways"}, "--direction"},
		{[]string{"bench", "--backend", "tpu"}, "--backend"},
		{[]string{"bench", "--causal", "maybe"}, "want true, false or both"},
		{[]string{"bench", "--window", "3"}, "--window"},
		{[]string{"bench", "--window", "1,2,3"}, "--window"},
		{[]string{"bench", "--window", "1,x"}, "--window"},
		{[]string{"bench", "--softcap", "-1"}, "--softcap"},
		{[]string{"bench", "--softcap", "NaN"}, "--softcap"},
		{[]string{"bench", "--backend", "cpu", "--window", "16,0"}, "need a GPU"},
		{[]string{"bench", "--backend", "cpu-flash", "--softcap", "30", "--alibi"}, "need a GPU"},
		{[]string{"bench", "--varlen", "100,30", "--window", "-2,0"}, "--window"}, // parsed before --varlen's run
		{[]string{"bench", "--varlen", "100,30", "--out", "x"}, "drop --out"},
		{[]string{"bench", "--varlen", "100,30", "--backend", "cpu"}, "drop --out and --backend cpu"},
		{[]string{"bench", "--varlen", "100,30", "--reps", "-3"}, "must not be negative"},
		{[]string{"bench", "--reps", "-1"}, "must not be negative"},
		{[]string{"bench", "stray"}, "unexpected argument"},
		{[]string{"bench", "--seqlens", "1000000000000", "--batch", "1000", "--headdims", "128"}, "too large"},
		{[]string{"--nope"}, "flag provided but not defined"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"demo", "--sizes", "0"}, "dimension N is 0"},
		{[]string{"demo", "--headdim", "0"}, "dimension D is 0"},
		{[]string{"demo", "--heads", "-3"}, "dimension H is -3"},
		{[]string{"demo", "--sizes", "1000000"}, "too large for the demo"},
		{[]string{"demo", "--backend", "tpu"}, "--backend"},
		{[]string{"check", "--device", "-5"}, "--device"},
		{[]string{"check", "extra"}, "unexpected argument"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", c.args, code, exitUsage, stderr)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "goflash") || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: stderr %q, want one line starting with goflash and containing %q", c.args, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: printed on stdout: %q", c.args, stdout)
		}
	}
}

func TestBenchCPUWritesJSONAndCSV(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "bench", "--backend", "cpu", "--seqlens", "16,40", "--headdims", "8", "--heads", "2", "--kv-heads", "1",
		"--batch", "1", "--reps", "1", "--warmup", "0", "--direction", "both", "--out", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress bar drawn on a non-terminal: %q", stderr)
	}
	var res BenchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	// 2 N x 2 causal x 2 backends x (fwd, bwd, derived fwdbwd).
	if len(res.Rows) != 24 {
		t.Errorf("%d rows, want 24", len(res.Rows))
	}
	counts := map[string]int{}
	for _, r := range res.Rows {
		counts[r.Impl+" "+r.Direction]++
		if r.Status != statusOK || r.MS <= 0 || r.TFLOPs <= 0 || r.Hkv != 1 || r.Hq != 2 || r.D != 8 {
			t.Errorf("row %+v", r)
		}
		want := r.Dims().FLOPs(r.Causal) * map[string]float64{dirFwd: 1, dirBwd: 2.5, dirFwdBwd: 3.5}[r.Direction]
		if r.FLOPs != want {
			t.Errorf("%s %s %v: FLOPs %g, want %g", r.Impl, r.Direction, caseOf(r), r.FLOPs, want)
		}
	}
	for _, k := range []string{"goflash-cpu-flash fwd", "goflash-cpu-naive bwd", "goflash-cpu-flash fwdbwd"} {
		if counts[k] != 4 {
			t.Errorf("%d rows %q, want 4", counts[k], k)
		}
	}
	if res.Device.Kind != "cpu" || res.Meta.Date == "" || res.Meta.Commit == "" || len(res.Notes) == 0 || len(res.Table) != 12 || res.Settings.DType != "fp32" {
		t.Errorf("device %+v, meta %+v, notes %q, %d table lines, dtype %q (the CPU computes in fp32)", res.Device, res.Meta, res.Notes, len(res.Table), res.Settings.DType)
	}
	recs := readCSV(t, filepath.Join(dir, "bench.csv"))
	if len(recs) != 1+len(res.Rows) || strings.Join(recs[0], ",") != strings.Join(bench.CSVHeader, ",") {
		t.Errorf("CSV: %d records, header %v", len(recs), recs[0])
	}
	if i := slices.Index(bench.CSVHeader, "dtype"); i < 0 || len(recs) < 2 || recs[1][i] != "fp32" {
		t.Errorf("CSV: no dtype column saying fp32 for a CPU row: %v", recs[min(1, len(recs)-1)])
	}
	for _, name := range []string{"bench.json", "bench.md", "bench.html"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestBenchCompareTorchMergesSDPA(t *testing.T) {
	dir, script := fakeSDPA(t, "ok")
	code, stdout, stderr := runCLI(t, "bench", "--backend", "cpu-flash", "--seqlens", "16,32", "--headdims", "8", "--heads", "2",
		"--causal", "true", "--reps", "1", "--warmup", "0", "--out", dir, "--compare-torch", "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"PyTorch " + benchtest.Torch, "sdpa flash", "sdpa cudnn", "sdpa efficient", "vs flash", "vs cudnn", "skipped"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	res := readBench(t, dir)
	if res.Torch == nil || res.Torch.Status != statusOK || res.Torch.Device != benchtest.Device || len(res.Table) != 2 {
		t.Fatalf("torch %+v, %d table lines", res.Torch, len(res.Table))
	}
	// The CSV says each side's element type: ours float32 on the CPU, PyTorch's fp16.
	for _, rec := range readCSV(t, filepath.Join(dir, "bench.csv"))[1:] {
		want := "fp32"
		if strings.HasPrefix(rec[slices.Index(bench.CSVHeader, "impl")], implTorchPref) {
			want = "fp16"
		}
		if got := rec[slices.Index(bench.CSVHeader, "dtype")]; got != want {
			t.Errorf("CSV %s: dtype %q, want %q", rec[slices.Index(bench.CSVHeader, "impl")], got, want)
		}
	}
	// Ours ran on the CPU, PyTorch on a GPU: the notes must say the ratios are not like for like.
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "NOT LIKE FOR LIKE: GoFlash ran on the CPU") }) {
		t.Errorf("no note that the devices differ: %q", res.Notes)
	}
	for _, l := range res.Table {
		if len(l.Torch) != 4 || l.Torch[0].Impl != "torch-flash" || l.TorchCell("math").Status != statusSkipped {
			t.Errorf("line %+v", l)
			continue
		}
		// Ratios are ours over theirs, from the rates in the rows.
		if got, want := l.VsFlash, l.Ours.TFLOPs/2e-3; !near(got, want) {
			t.Errorf("vs flash %g, want %g", got, want)
		}
		if got, want := l.VsCuDNN, l.Ours.TFLOPs/4e-3; !near(got, want) {
			t.Errorf("vs cudnn %g, want %g", got, want)
		}
		if got, want := l.VsEff, l.Ours.TFLOPs/1e-3; !near(got, want) {
			t.Errorf("vs efficient %g, want %g", got, want)
		}
		if l.VsMath != 0 {
			t.Errorf("vs math %g for a skipped math run, want 0", l.VsMath)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "bench.md"))
	if !strings.Contains(string(md), "| dir | D | causal | N | B | H | ours TFLOP/s | sdpa flash | sdpa cudnn |") {
		t.Errorf("bench.md table header missing:\n%s", md)
	}
}

func TestBenchCompareTorchWithoutTorchIsSkippedClearly(t *testing.T) {
	dir, script := fakeSDPA(t, "notorch")
	code, stdout, stderr := runCLI(t, "bench", "--backend", "cpu-flash", "--seqlens", "16", "--headdims", "8", "--heads", "1",
		"--causal", "false", "--reps", "1", "--warmup", "0", "--out", dir, "--compare-torch", "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "note: PyTorch comparison skipped: PyTorch is not importable") {
		t.Errorf("no clear skip message:\n%s", stdout)
	}
}

// The real bench/sdpa.py, where python3 exists: without torch it must
// answer with its error JSON, which bench reports as a skip.
func TestRealSDPAScriptContract(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	script, err := findSDPA("")
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command(py, "-c", "import torch").Run() == nil {
		t.Skip("torch is installed: the contract without torch cannot be checked here")
	}
	c := []Case{{Dims: flashattn.Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 8}}}
	meta, rows := runTorch(t.Context(), py, script, c, []string{dirFwd}, 1, 0, 0, "", "fp16", io.Discard)
	if meta.Status != statusSkipped || rows != nil || !strings.Contains(meta.Reason, "torch") {
		t.Errorf("meta %+v, rows %v", meta, rows)
	}
	// Emulation is still PyTorch's answer: without torch, still a skip.
	meta, _ = runTorch(t.Context(), py, script, c, []string{dirFwd}, 1, 0, 0, bench.EmulateSM75, "fp16", io.Discard)
	if meta.Status != statusSkipped || meta.Emulate != bench.EmulateSM75 {
		t.Errorf("emulated: meta %+v", meta)
	}
}

func TestCheckSelfTests(t *testing.T) {
	code, stdout, stderr := runCLI(t, "check", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var res CheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if res.Failed != 0 || res.Passed == 0 || res.Passed != len(res.Tests) {
		t.Errorf("passed %d, failed %d, %d tests", res.Passed, res.Failed, len(res.Tests))
	}
	if len(res.GPUs) == 0 {
		if res.NoGPU == "" {
			t.Errorf("no GPU and no reason given")
		}
		targets := map[string]int{}
		for _, r := range res.Tests {
			targets[r.Target+" "+r.Direction]++
		}
		for _, k := range []string{"cpu-naive fwd", "cpu-naive bwd", "cpu-flash fwd", "cpu-flash bwd"} {
			if targets[k] == 0 {
				t.Errorf("no %s self-test", k)
			}
		}
	}
}

// The accuracy check must be able to fail: a result with one wrong element
// or a NaN is caught.
func TestCheckerCatchesWrongResults(t *testing.T) {
	c := Case{Dims: flashattn.Dims{B: 1, Nq: 33, Nk: 33, Hq: 2, Hkv: 1, D: 16}, Causal: true}
	q, k, v, _ := testInputs(c)
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, Backend: flashattn.CPUFlash})
	if err != nil {
		t.Fatal(err)
	}
	if acc := checkForward(attntest.FP32, q, k, v, true, res); !acc.Pass {
		t.Fatalf("a correct result fails: %+v", acc)
	}
	for name, corrupt := range map[string]func(r *flashattn.Result){
		"one element off by 1e-3": func(r *flashattn.Result) { r.Out.Data[100] += 1e-3 },
		"NaN output":              func(r *flashattn.Result) { r.Out.Data[7] = float32(nan()) },
		"LSE off":                 func(r *flashattn.Result) { r.LSE[5] += 1e-2 },
	} {
		bad := &flashattn.Result{Dims: res.Dims, Out: res.Out.Clone(), LSE: append([]float32(nil), res.LSE...)}
		corrupt(bad)
		if acc := checkForward(attntest.FP32, q, k, v, true, bad); acc.Pass || len(acc.Failures) == 0 {
			t.Errorf("%s: passed (%+v)", name, acc)
		}
	}
}

// The built binary, as a user runs it: the default command is the demo,
// and bad input exits 2 with one line on stderr.
func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "goflash")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The README's main-job command, exactly: no flags.
	report := filepath.Join(dir, ".out", "goflash-demo.html")
	cmd := exec.Command(bin)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("goflash: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "GoFlash demo") || !strings.Contains(string(out), "report: "+report) {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(report); err != nil {
		t.Error(err)
	}
	cmd = exec.Command(bin, "bench", "--heads", "3", "--kv-heads", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitUsage {
		t.Fatalf("bad shape: err %v, want exit status %d", err, exitUsage)
	}
	if s := stderr.String(); strings.Count(s, "\n") != 1 || strings.Contains(s, "goroutine") {
		t.Errorf("stderr %q, want one line", s)
	}
}

// A T4's answer (flash unsupported), rehearsed with --torch-emulate sm75: the
// table says unsupported, every output names the memory-efficient baseline
// and labels the run a rehearsal.
func TestBenchCompareTorchT4Answer(t *testing.T) {
	dir, script := fakeSDPA(t, benchtest.T4)
	code, stdout, stderr := runCLI(t, "bench", "--backend", "cpu-flash", "--seqlens", "16,32", "--headdims", "8", "--heads", "2",
		"--causal", "true", "--reps", "1", "--warmup", "0", "--out", dir, "--compare-torch", "--torch-emulate", "sm75",
		"--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"EMULATING sm75", "note: speedups are over PyTorch SDPA memory-efficient (flash unsupported: No available kernel",
		"note: REHEARSAL: PyTorch answered as on sm75", "unsupported"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	res := readBench(t, dir)
	if res.Torch == nil || res.Torch.Emulate != "sm75" || len(res.Table) != 2 {
		t.Fatalf("torch %+v, %d lines", res.Torch, len(res.Table))
	}
	for _, l := range res.Table {
		if l.TorchCell("flash").Status != statusUnsupported || l.TorchCell("cudnn").Status != statusUnsupported || l.VsFlash != 0 || l.VsCuDNN != 0 ||
			!near(l.VsEff, l.Ours.TFLOPs/1e-3) {
			t.Errorf("line %+v", l)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "bench.md"))
	html, _ := os.ReadFile(filepath.Join(dir, "bench.html"))
	if !strings.Contains(string(md), "EMULATING sm75") || !strings.Contains(string(md), "speedups are over PyTorch SDPA memory-efficient") {
		t.Errorf("bench.md does not say emulated and which baseline:\n%s", md)
	}
	if !strings.Contains(string(html), "Speedup over PyTorch SDPA memory-efficient") || !strings.Contains(string(html), "REHEARSAL") {
		t.Error("bench.html has no speedup chart over the efficient backend, or no rehearsal label")
	}
}

func TestBenchTorchEmulateFlag(t *testing.T) {
	for _, args := range [][]string{{"--torch-emulate", "sm75"}, {"--compare-torch", "--torch-emulate", "sm70"}} {
		code, _, stderr := runCLI(t, append([]string{"bench", "--backend", "cpu-flash", "--seqlens", "16", "--headdims", "8"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--torch-emulate") {
			t.Errorf("%q: exit %d, stderr %s", args, code, stderr)
		}
	}
}
