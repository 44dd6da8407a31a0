package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
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
	// The bandwidth table's numbers, worked from the rows: ours TB/s is the
	// cache's bytes over our time, vs SDPA the best SDPA time over ours.
	_, head, cells := decodeBandwidth(&res)
	col := func(name string) int { return slices.Index(head, name) }
	for _, l := range res.Table {
		ours, best := 0.0, math.Inf(1)
		for _, r := range res.Rows {
			if r.Shape != l.Shape || r.Direction != l.Direction || r.Status != statusOK {
				continue
			}
			if r.Impl == implGPU {
				ours = r.MS
			} else if strings.HasPrefix(r.Impl, implTorchPref) {
				best = math.Min(best, r.MS)
			}
		}
		tbps := float64(4*l.B*l.Nk*l.Hkv*l.D) / (ours * 1e-3) / 1e12
		found := false
		for _, c := range cells {
			if c[col("Nk")] == fmt.Sprint(l.Nk) {
				found = true
				if c[col("vs SDPA")] != fmtRatio(best/ours) || c[col("ours TB/s")] != fmtSig(tbps) {
					t.Errorf("Nk %d: vs SDPA %s, ours TB/s %s; want %s, %s", l.Nk, c[col("vs SDPA")], c[col("ours TB/s")], fmtRatio(best/ours), fmtSig(tbps))
				}
			}
		}
		if !found {
			t.Errorf("no bandwidth line for Nk %d", l.Nk)
		}
	}
	// The CSV carries each row's bandwidth and dtype.
	recs := readCSV(t, filepath.Join(dir, "bench.csv"))
	for _, rec := range recs[1:] {
		impl, tb, dt := rec[slices.Index(bench.CSVHeader, "impl")], rec[slices.Index(bench.CSVHeader, "tb_per_s")], rec[slices.Index(bench.CSVHeader, "dtype")]
		if rec[slices.Index(bench.CSVHeader, "status")] == statusOK && (tb == "" || dt != "fp16") {
			t.Errorf("CSV %s: tb_per_s %q, dtype %q", impl, tb, dt)
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
	// The flags reach the GPU call as given (the plain line gets none).
	if m := f.mods[len(f.mods)-1]; m.window == nil || *m.window != (flashattn.Window{Left: 4096, Right: -1}) || m.softcap != 30 || m.alibi {
		t.Errorf("the modified call got %+v", m)
	} else if f.mods[len(f.mods)-2].any() {
		t.Errorf("the plain call got %+v", f.mods[len(f.mods)-2])
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

// TestPrintVarlen: the --varlen table's ratios are the varlen call's over
// the padded one's (rates on real tokens, memory), and its first line and
// --json name the date, commit and partial state.
func TestPrintVarlen(t *testing.T) {
	runs := []varlenRun{{D: 128, Hq: 16, Hkv: 16, Causal: true, Result: varlenResult{
		Varlen: flashattn.BenchResult{MedianMs: 2, TFLOPS: 300}, Padded: flashattn.BenchResult{MedianMs: 5, TFLOPS: 120},
		PaddedAllTFLOPS: 400, VarlenBytes: 3e8, PaddedBytes: 6e8}}}
	meta := Meta{Date: "2026-12-05T00:00:00Z", Commit: "abc", Partial: true}
	var b strings.Builder
	if err := printVarlen(&b, benchOpts{}, meta, DeviceMeta{Name: "GPU X"}, intList{100, 300}, "forward", 20, 5, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU X (2026-12-05T00:00:00Z, commit abc) (PARTIAL: interrupted)", "2.500x TFLOP/s (0.750x all tokens)", "0.500x memory"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := printVarlen(&b, benchOpts{json: true}, meta, DeviceMeta{Name: "GPU X"}, intList{100, 300}, "forward", 20, 5, runs); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta Meta        `json:"meta"`
		Runs []varlenRun `json:"runs"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil || doc.Meta.Commit != "abc" || !doc.Meta.Partial || len(doc.Runs) != 1 {
		t.Errorf("--json: %v, %+v", err, doc)
	}
}

// TestCompareVarlen: the padded call's rate is counted on the packed call's
// FLOPs (the real tokens'), its own kept as PaddedAllTFLOPS, and each
// call's memory is its tensors (the backward's nine) and ExtraBytes.
func TestCompareVarlen(t *testing.T) {
	packedDims := flashattn.Dims{B: 1, Nq: 400, Nk: 400, Hq: 2, Hkv: 1, D: 64}
	paddedDims := flashattn.Dims{B: 2, Nq: 300, Nk: 300, Hq: 2, Hkv: 1, D: 64}
	for _, backward := range []bool{false, true} {
		packed := flashattn.BenchResult{Dims: packedDims, Backward: backward, MedianMs: 2, MinMs: 1, TFLOPS: 300, ExtraBytes: 1000}
		padded := flashattn.BenchResult{Dims: paddedDims, Backward: backward, MedianMs: 5, MinMs: 4, TFLOPS: 200, ExtraBytes: 3000}
		r := compareVarlen([]int{100, 300}, packed, padded)
		// 300 TFLOP/s over 2 ms is 6e11 FLOPs: 120 TFLOP/s over 5 ms, 150 over 4.
		if r.Padded.TFLOPS != 120 || r.Padded.PeakTFLOPS != 150 || r.PaddedAllTFLOPS != 200 || r.Varlen.TFLOPS != 300 {
			t.Errorf("backward %v: padded %.6g (peak %.6g, all tokens %.6g), varlen %.6g TFLOP/s", backward,
				r.Padded.TFLOPS, r.Padded.PeakTFLOPS, r.PaddedAllTFLOPS, r.Varlen.TFLOPS)
		}
		tensors := func(d flashattn.Dims) int64 { return 2 * int64(2*d.QShape().Numel()+2*d.KVShape().Numel()) }
		wantVarlen, wantPadded := tensors(packedDims)+1000, tensors(paddedDims)+3000
		if backward {
			wantVarlen += tensors(packedDims) + int64(packedDims.LSEBytes())
			wantPadded += tensors(paddedDims) + int64(paddedDims.LSEBytes())
		}
		if r.VarlenBytes != wantVarlen || r.PaddedBytes != wantPadded {
			t.Errorf("backward %v: %d and %d bytes, want %d and %d", backward, r.VarlenBytes, r.PaddedBytes, wantVarlen, wantPadded)
		}
	}
}
