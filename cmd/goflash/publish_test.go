package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
)

// The README's performance section, docs/performance.md and the chart are
// what perf/'s published runs give: a hand-edited figure, or a run added
// without `goflash results`, fails here.
func TestPublishedResultsInStep(t *testing.T) {
	code, stdout, stderr := runCLI(t, "results", "--check", "--root", "../..")
	if code != 0 {
		t.Fatalf("goflash results --check: exit %d\n%s%s", code, stdout, stderr)
	}
}

// copyTree copies the files results reads (README, docs, perf) into a
// temporary root.
func copyTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", p)
		top := strings.Split(rel, string(filepath.Separator))[0]
		if d.IsDir() {
			if rel != "." && top != "perf" && top != "docs" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		if top != "perf" && top != "docs" && rel != readmePath {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestPublishedResultsCatchEdits(t *testing.T) {
	edit := func(t *testing.T, root, name string, f func(string) string) {
		t.Helper()
		p := filepath.Join(root, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := f(string(data))
		if s == string(data) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The first figure of the section's first table row, hand-edited.
	bumpFigure := func(s string) string {
		i := strings.Index(s, perfBegin)
		if i < 0 {
			t.Fatalf("no perf section")
		}
		j := strings.Index(s[i:], "| forward |")
		if j < 0 {
			t.Fatalf("no forward row in the perf section")
		}
		j += i
		k := strings.Index(s[j:], "| 5") // a TFLOP/s cell
		if k < 0 {
			t.Fatalf("no TFLOP/s cell starting with 5 in the first forward row")
		}
		k += j
		return s[:k] + "| 9" + s[k+3:]
	}
	for _, c := range []struct {
		name, file string
		f          func(string) string
		wantStale  string
	}{
		{"README figure", readmePath, bumpFigure, readmePath},
		{"docs figure", perfDoc, func(s string) string {
			return strings.Replace(s, "| forward | 64 | no | 2048 |", "| forward | 64 | no | 2049 |", 1)
		}, perfDoc},
		{"data", "perf/h100-2026-12-train/fp16/bench.csv", func(s string) string {
			// GoFlash's forward at N 8192, D 64, no mask: a faster figure.
			lines := strings.Split(s, "\n")
			for i, l := range lines {
				if f := strings.Split(l, ","); len(f) > 16 && strings.Join(f[5:15], ",") == "goflash-gpu,fwd,2,32,32,8192,8192,64,false,ok" {
					f[16] = "999"
					lines[i] = strings.Join(f, ",")
				}
			}
			return strings.Join(lines, "\n")
		}, readmePath},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := copyTree(t)
			if code, _, stderr := runCLI(t, "results", "--check", "--root", root); code != 0 {
				t.Fatalf("unedited copy: exit %d: %s", code, stderr)
			}
			edit(t, root, c.file, c.f)
			code, _, stderr := runCLI(t, "results", "--check", "--root", root)
			if code == 0 || !strings.Contains(stderr, c.wantStale) {
				t.Fatalf("after editing %s: exit %d, stderr %q; want a failure naming %s", c.file, code, stderr, c.wantStale)
			}
			// Regenerating mends it (a hand edit of generated text does not survive).
			if code, _, stderr := runCLI(t, "results", "--root", root); code != 0 {
				t.Fatalf("regenerate: exit %d: %s", code, stderr)
			}
			if code, _, stderr := runCLI(t, "results", "--check", "--root", root); code != 0 {
				t.Fatalf("after regenerating: exit %d: %s", code, stderr)
			}
		})
	}
}

func TestBenchRefusesADirtyPublish(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module github.com/goflash/goflash\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(root, "perf", "x-2026-12", "fp16")
	for _, c := range []struct {
		out, commit string
		refused     bool
	}{
		{pub, "0123456789abcdef+dirty", true},
		{pub, "unknown", true},
		{pub, "", true},
		{pub, "0123456789abcdef", false},
		{filepath.Join(root, ".out", "bench"), "0123456789abcdef+dirty", false},
		{filepath.Join(t.TempDir(), "perf", "y"), "0123456789abcdef+dirty", false}, // a perf/ of another tree
	} {
		err := checkPublishable(c.out, c.commit)
		if (err != nil) != c.refused {
			t.Errorf("checkPublishable(%s, %q) = %v, want refused %v", c.out, c.commit, err, c.refused)
		}
		if err != nil && exitCode(err) != exitUsage {
			t.Errorf("refusal exits %d, want %d", exitCode(err), exitUsage)
		}
	}
	// Through the command, as a build from a modified tree and from a clean
	// commit would run it (commit is what -ldflags -X sets).
	saved := commit
	t.Cleanup(func() { commit = saved })
	for _, c := range []struct {
		commit string
		code   int
	}{{"0123456789abcdef+dirty", exitUsage}, {"0123456789abcdef", exitOK}} {
		commit = c.commit
		code, _, stderr := runCLI(t, "bench", "--backend", "cpu-flash", "--seqlens", "64", "--headdims", "32", "--reps", "1", "--warmup", "0", "--no-report", "--out", pub)
		if code != c.code || (code == exitUsage) != strings.Contains(stderr, "under perf/") {
			t.Fatalf("bench --out perf/... built from %q: exit %d, stderr %q; want exit %d", c.commit, code, stderr, c.code)
		}
		_, err := os.Stat(filepath.Join(pub, "bench.csv"))
		if wrote := err == nil; wrote != (c.code == exitOK) {
			t.Fatalf("built from %q: bench.csv written %v", c.commit, wrote)
		}
	}
}

// TestPublishedLadderRun: a kernel-ladder run in perf/ gets its own table
// in docs/performance.md (each rung, the edited one, their kernel figures);
// the README's tables and chart stay the sweeps'.
func TestPublishedLadderRun(t *testing.T) {
	f := &fakeGPU{}
	withFakeGPU(t, f)
	src := filepath.Join(t.TempDir(), "rung4.cuh")
	if err := os.WriteFile(src, []byte("// edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if code, _, stderr := runCLI(t, "bench", "--rung-source", "4="+src, "--seqlens", "1024,4096", "--reps", "1", "--warmup", "0", "--no-report", "--out", out); code != exitOK {
		t.Fatalf("bench --rung-source: exit %d: %s", code, stderr)
	}
	root := copyTree(t)
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	readme, chart := read(readmePath), read(perfChart)
	run := filepath.Join(root, "perf", "zz-ladder")
	csv, err := os.ReadFile(filepath.Join(out, "bench.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"run.sh": "#!/bin/sh\n", "env.txt": "Fake GPU\n", "ladder/bench.csv": string(csv)} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(run, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, _ := runCLI(t, "results", "--check", "--root", root); code == exitOK {
		t.Errorf("results --check passed with a new run not yet in docs/performance.md")
	}
	if code, _, stderr := runCLI(t, "results", "--root", root); code != exitOK {
		t.Fatalf("results: exit %d: %s", code, stderr)
	}
	if read(readmePath) != readme || read(perfChart) != chart {
		t.Errorf("a ladder run changed the README's tables or chart")
	}
	doc := read(perfDoc)
	i := strings.Index(doc, "### ladder: kernel ladder, forward, fp16, the sm_80 kernels")
	if i < 0 {
		t.Fatalf("docs/performance.md has no ladder table:\n%s", doc)
	}
	table := doc[i:]
	for _, want := range []string{"| rung 1 | fake_rung1 | 48 | 16384 | 25% |", "| rung 4 | fake_rung4 | 72 |", "| shipped | fake_rung5 | 80 |", "| edited (NVRTC) | fake_rung4 | 73 |", "N 4096 causal"} {
		if !strings.Contains(table, want) {
			t.Errorf("ladder table lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(table, "| rung 4 |") > strings.Index(table, "| shipped |") || strings.Index(table, "| shipped |") > strings.Index(table, "| edited (NVRTC) |") {
		t.Errorf("ladder table rows out of order:\n%s", table)
	}
}

// TestChartRunHasFP16: the chart (fp16, forward) comes from the last run
// with an fp16 sweep, not from a later bf16-only run or a ladder run.
func TestChartRunHasFP16(t *testing.T) {
	part := func(dt, impl string) pubPart {
		return pubPart{res: &bench.Result{Settings: bench.Settings{DType: dt}, Rows: []bench.Row{{Impl: impl}}}}
	}
	runs := []pubRun{
		{name: "a", parts: []pubPart{part("fp16", bench.ImplGPU)}},
		{name: "b", parts: []pubPart{part("fp16", bench.ImplGPU), part("bf16", bench.ImplGPU)}},
		{name: "c", parts: []pubPart{part("bf16", bench.ImplGPU)}},
		{name: "d", parts: []pubPart{part("fp16", bench.ImplRungPref+"1")}},
	}
	if got := chartRun(runs).name; got != "b" {
		t.Errorf("chart run %q, want b (the last with an fp16 sweep)", got)
	}
	if got := chartRun(runs[2:]).name; got != "c" {
		t.Errorf("no fp16 sweep: chart run %q, want the first, c", got)
	}
}
