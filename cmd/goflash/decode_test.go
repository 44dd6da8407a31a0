package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
)

// TestBenchDecode: --decode plans the decode sweep (Llama-like defaults,
// direction decode, nq and page passed on), asks sdpa.py for the same
// shapes and prints each shape's bandwidth beside the best SDPA backend.
func TestBenchDecode(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	dir, script := fakeSDPA(t, "ok")
	code, stdout, stderr := runCLI(t, "bench", "--decode", "--seqlens", "1024,32768", "--nq", "2", "--page", "256", "--peak-tbps", "5",
		"--compare-torch", "--reps", "1", "--warmup", "0", "--out", dir, "--python", os.Args[0], "--sdpa", script)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	res := readBench(t, dir)
	if res.Settings.Direction != dirDecode || res.Settings.PageSize != 256 || res.Settings.PeakTBps != 5 || len(res.Table) != 2 {
		t.Fatalf("settings %+v, %d table lines", res.Settings, len(res.Table))
	}
	for _, l := range res.Table {
		if l.Direction != dirDecode || l.B != 1 || l.Hq != 32 || l.Hkv != 8 || l.Nq != 2 || l.D != 128 || l.Causal || len(l.Torch) != len(bench.TorchBackends) || l.VsFlash <= 0 || l.VsCuDNN <= 0 {
			t.Errorf("line %+v", l)
		}
	}
	for _, r := range res.Rows {
		if r.Status == statusOK && r.TBps <= 0 {
			t.Errorf("row without bandwidth: %+v", r)
		}
	}
	for _, want := range []string{"decode bandwidth", "ours TB/s", "80%", "torch-cudnn" /* the fastest of benchtest.Rates */} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// The report has the same bandwidth table, and no throughput chart over N
	// (every decode point has N = Nq, which would stack the cache lengths).
	html, err := os.ReadFile(filepath.Join(dir, "bench.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "Decode bandwidth") || !strings.Contains(string(html), "ours TB/s") || strings.Contains(string(html), "Throughput: ") {
		t.Errorf("bench.html: want the decode bandwidth table and no throughput chart")
	}
	// --window, --softcap and --alibi add the modified decode call, with its own bandwidth line.
	code, stdout, stderr = runCLI(t, "bench", "--decode", "--seqlens", "32768", "--window", "4096,-1", "--softcap", "30",
		"--reps", "1", "--warmup", "0", "--out", t.TempDir())
	if code != 0 || strings.Count(stdout, "gpu-mod") < 2 { // its TFLOP/s column and its bandwidth line
		t.Errorf("decode with modifiers: exit %d, stderr %s, output:\n%s", code, stderr, stdout)
	}
	// --with-sm80 adds no decode line (the decode kernels are the same on
	// both paths) and says so; --force-arch 80 on the sm_90 fake names the
	// GPU line after the sm_80 path, and the bandwidth table still has it as
	// ours (the fake's 2.8 TB/s, 56% of 5).
	code, stdout, stderr = runCLI(t, "bench", "--decode", "--seqlens", "32768", "--with-sm80", "--peak-tbps", "5",
		"--reps", "1", "--warmup", "0", "--out", t.TempDir())
	if code != 0 || strings.Contains(stdout, "gpu-sm80") || !strings.Contains(stdout, "--with-sm80 ignored: --decode") || !strings.Contains(stdout, "80%") {
		t.Errorf("decode --with-sm80: exit %d, stderr %s, output:\n%s", code, stderr, stdout)
	}
	for _, extra := range [][]string{{"--force-arch", "80"}, {"--force-arch", "80", "--with-sm75"}} {
		code, stdout, stderr = runCLI(t, append([]string{"bench", "--decode", "--seqlens", "32768", "--peak-tbps", "5",
			"--reps", "1", "--warmup", "0", "--out", t.TempDir()}, extra...)...)
		_, bw, _ := strings.Cut(stdout, "decode bandwidth")
		if code != 0 || !strings.Contains(bw, "2.80") || !strings.Contains(bw, "56%") {
			t.Errorf("decode %v: exit %d, stderr %s, output:\n%s", extra, code, stderr, stdout)
		}
	}
	for _, bad := range [][]string{
		{"--decode", "--direction", "bwd"},
		{"--decode", "--page", "24"},
		{"--decode", "--page", "48", "--seqlens", "1024"},
		{"--decode", "--kv-len", "64"},
		{"--nq", "4"},
	} {
		if code, _, _ := runCLI(t, append(append([]string{"bench"}, bad...), "--out", t.TempDir())...); code != 2 {
			t.Errorf("bench %v: exit %d, want 2 (usage)", bad, code)
		}
	}
}
