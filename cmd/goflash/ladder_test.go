package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
)

// TestBenchLadder: --ladder checks and times every rung, the shipped one
// under the GPU line's name (on an sm_90 GPU the sm_80 path's), and
// --rung-source adds the edited rung; bench.csv keeps each rung's kernel
// figures and the share of the allowed error it used.
func TestBenchLadder(t *testing.T) {
	for _, c := range []struct {
		arch, force int
		shipped     string
		uses        []int
	}{{90, 0, implGPUSM80, []int{80}}, {86, 0, implGPU, nil}, {90, 75, implGPUSM75, []int{75}}} {
		f := &fakeGPU{arch: c.arch}
		withFakeGPU(t, f)
		src := filepath.Join(t.TempDir(), "rung4.cuh")
		if err := os.WriteFile(src, []byte("// rung 4, edited\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		args := []string{"bench", "--rung-source", "4=" + src, "--reps", "1", "--warmup", "0", "--no-report", "--out", dir}
		if c.force != 0 {
			args = append(args, "--force-arch", "75")
		}
		code, _, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("sm_%d --force-arch %d: exit %d, stderr:\n%s", c.arch, c.force, code, stderr)
		}
		if !slices.Equal(f.uses, c.uses) || f.rung != 0 || f.rungSrc != "" {
			t.Errorf("sm_%d: paths used %v, want %v; rung left selected %d %q", c.arch, f.uses, c.uses, f.rung, f.rungSrc)
		}
		res, err := bench.ReadCSV(filepath.Join(dir, "bench.csv"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{bench.ImplRung(1), bench.ImplRung(2), bench.ImplRung(3), bench.ImplRung(4), c.shipped, bench.ImplRungEdit}
		n := len(ladderSeqLens) * 2 // both masks
		count := map[string]int{}
		rate := map[string]float64{}
		for _, r := range res.Rows {
			count[r.Impl]++
			if r.Status != statusOK || r.D != 64 || r.Direction != dirFwd || r.ErrUsed <= 0 || r.ErrUsed > 1 || r.Registers == 0 || r.SmemBytes != 16<<10 || r.Occupancy != 0.25 {
				t.Errorf("sm_%d: row %+v", c.arch, r)
			}
			if r.Nq == 4096 && !r.Causal {
				rate[r.Impl] = r.TFLOPs
			}
		}
		for _, impl := range want {
			if count[impl] != n {
				t.Errorf("sm_%d: %d rows of %s, want %d (%v)", c.arch, count[impl], impl, n, count)
			}
		}
		if len(count) != len(want) {
			t.Errorf("sm_%d: implementations %v, want %v", c.arch, count, want)
		}
		// The fake's rung r runs at r/5 of the path's rate: each row is its own rung's.
		for r := 1; r < 4; r++ {
			if !(rate[bench.ImplRung(r)] < rate[bench.ImplRung(r+1)]) {
				t.Errorf("sm_%d: rung %d %.1f TFLOP/s, rung %d %.1f", c.arch, r, rate[bench.ImplRung(r)], r+1, rate[bench.ImplRung(r+1)])
			}
		}
		if rate[bench.ImplRungEdit] != rate[bench.ImplRung(4)] || rate[c.shipped] <= rate[bench.ImplRung(4)] {
			t.Errorf("sm_%d: rates %v", c.arch, rate)
		}
		for _, l := range res.Table {
			if l.Ours.Impl != c.shipped || len(l.Others) != 5 {
				t.Errorf("sm_%d: table line %+v", c.arch, l)
			}
		}
	}
}

// TestBenchLadderBrokenEdit: an edit whose results fail the check is not
// timed (its rows say why, the run fails), one that does not compile says
// so, and the rungs as shipped still run.
func TestBenchLadderBrokenEdit(t *testing.T) {
	for _, c := range []struct{ src, reason string }{{"BROKEN", "fails the check"}, {"NOCOMPILE", "is undefined"}} {
		f := &fakeGPU{}
		withFakeGPU(t, f)
		src := filepath.Join(t.TempDir(), "rung4.cuh")
		if err := os.WriteFile(src, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		code, _, stderr := runCLI(t, "bench", "--rung-source", "4="+src, "--seqlens", "1024", "--causal", "false", "--reps", "1", "--warmup", "0", "--no-report", "--out", dir)
		if code == exitOK || !strings.Contains(stderr, c.reason) {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying %q", c.src, code, stderr, c.reason)
		}
		res, err := bench.ReadCSV(filepath.Join(dir, "bench.csv"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rows {
			edited := r.Impl == bench.ImplRungEdit
			if edited != (r.Status != statusOK) || edited && (r.TFLOPs != 0 || !strings.Contains(r.Reason, c.reason)) {
				t.Errorf("%s: row %+v", c.src, r)
			}
		}
	}
}

// TestBenchLadderRefusals: what the ladder cannot time is a usage error
// before any work.
func TestBenchLadderRefusals(t *testing.T) {
	withFakeGPU(t, &fakeGPU{})
	out := t.TempDir()
	for _, args := range [][]string{
		{"--ladder", "--direction", "bwd"},
		{"--ladder", "--headdims", "128"},
		{"--ladder", "--dtype", "bf16"},
		{"--ladder", "--decode"},
		{"--ladder", "--softcap", "30"},
		{"--rung-source", "9=x.cuh"},
		{"--rung-source", "4"},
		{"--rung-source", "4=" + filepath.Join(out, "missing.cuh")},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench", "--out", out}, args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line usage error", args, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "bench", "--ladder", "--backend", "cpu", "--out", out); code != exitUsage || !strings.Contains(stderr, "needs a GPU") {
		t.Errorf("--ladder on the CPU: exit %d, stderr %q", code, stderr)
	}
}
