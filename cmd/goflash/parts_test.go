package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
)

func expf(x float64) float64  { return math.Exp(x) }
func sqrtf(x float64) float64 { return math.Sqrt(x) }
func nan() float64            { return math.NaN() }
func near(a, b float64) bool  { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestListFlags(t *testing.T) {
	var l intList
	if err := l.Set("512, 1024,,2048"); err != nil || l.String() != "512,1024,2048" {
		t.Errorf("intList: %v %q", err, l.String())
	}
	for _, bad := range []string{"", ",", "1,x", "1.5"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("intList.Set(%q) accepted", bad)
		}
	}
	var c causalFlag
	for in, want := range map[string]string{"both": "both", "true": "true", "no": "false", "1": "true"} {
		if err := c.Set(in); err != nil || c.String() != want {
			t.Errorf("causal %q: %v %q", in, err, c.String())
		}
	}
	if err := c.Set("sometimes"); err == nil {
		t.Error("causal accepted sometimes")
	}
}

func TestPaperShapes(t *testing.T) {
	sf := shapeFlags{tokens: 16384, hidden: 2048, seqLens: paperSeqLens, headDims: paperHeadDims, causal: causalFlag{false, true}}
	cs, err := sf.cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 24 {
		t.Fatalf("%d cases, want 24", len(cs))
	}
	for _, c := range cs {
		d := c.Dims
		if d.B*d.Nq != 16384 || d.Hq*d.D != 2048 || d.Hkv != d.Hq || d.Nk != d.Nq {
			t.Errorf("case %v is not an FA2 paper shape", c)
		}
	}
	// GQA, Nk and explicit B and H are honoured.
	sf = shapeFlags{batch: 3, heads: 8, kvHeads: 2, kvLen: 100, tokens: 1, hidden: 1, seqLens: intList{50}, headDims: intList{64}, causal: causalFlag{true}}
	cs, err = sf.cases()
	if err != nil || len(cs) != 1 || cs[0].Dims != (flashattn.Dims{B: 3, Nq: 50, Nk: 100, Hq: 8, Hkv: 2, D: 64}) || !cs[0].Causal {
		t.Errorf("cases %v, err %v", cs, err)
	}
	if got := cs[0].String(); got != "B=3 H=8/2 N=50/100 D=64 causal" {
		t.Errorf("String() = %q", got)
	}
}

func TestDerivedFwdBwdAndTable(t *testing.T) {
	base := Row{Impl: implGPU, Shape: bench.Shape{B: 2, Hq: 4, Hkv: 4, Nq: 128, Nk: 128, D: 64}, Status: statusOK}
	f, b := base, base
	f.Direction, f.MS, f.FLOPs = dirFwd, 1, 1e9
	b.Direction, b.MS, b.FLOPs = dirBwd, 3, 2.5e9
	f.TFLOPs, b.TFLOPs = 1e-3, 2.5e-3/3
	fb := derivedFwdBwd([]Row{f, b})
	if len(fb) != 1 || fb[0].Direction != dirFwdBwd || fb[0].MS != 4 || !fb[0].Derived || !near(fb[0].TFLOPs, 3.5e9/4e-3/1e12) {
		t.Fatalf("derived %+v", fb)
	}
	// A failed bwd makes the sum unavailable, with the reason.
	b.Status, b.Reason = statusUnsupported, "no GPU backward"
	fb = derivedFwdBwd([]Row{f, b})
	if len(fb) != 1 || fb[0].Status != statusUnsupported || fb[0].MS != 0 || !strings.Contains(fb[0].Reason, "no GPU backward") {
		t.Errorf("derived with failed bwd %+v", fb)
	}
	// The table: GPU is the primary implementation; torch flash at half our rate.
	tf := f
	tf.Impl, tf.TFLOPs = implTorchPref+"flash", 0.5e-3
	te := f
	te.Impl, te.Status, te.TFLOPs = implTorchPref+"efficient", statusOOM, 0
	cpu := f
	cpu.Impl, cpu.TFLOPs = implCPUFlash, 1e-5
	lines := bench.BuildTable([]Row{cpu, tf, f, te})
	if len(lines) != 1 || lines[0].Ours.Impl != implGPU || !near(lines[0].VsFlash, 2) || lines[0].VsEff != 0 || lines[0].TorchCell("math").Status != "absent" ||
		lines[0].TorchCell("cudnn").Status != "absent" {
		t.Fatalf("table %+v", lines)
	}
	var buf bytes.Buffer
	printTable(&buf, lines)
	for _, want := range []string{"2.00x", "oom", "vs efficient"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("printed table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestFindSDPA(t *testing.T) {
	p, err := findSDPA("")
	if err != nil {
		t.Fatalf("bench/sdpa.py not found from the test's directory: %v", err)
	}
	if filepath.Base(p) != "sdpa.py" || filepath.Base(filepath.Dir(p)) != "bench" {
		t.Errorf("found %s", p)
	}
	if _, err := findSDPA(filepath.Join(t.TempDir(), "none.py")); err == nil {
		t.Error("a missing --sdpa path was accepted")
	}
}

func TestProgressOnlyOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, 3)
	p.begin("x")
	p.next()
	p.end()
	if buf.Len() != 0 {
		t.Errorf("progress wrote %q to a buffer", buf.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "p")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 65 << 30: "65.0 GiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestKernelModuleVersion(t *testing.T) {
	for _, c := range []struct{ proc, want string }{
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:55:41 UTC 2025\nGCC version:  gcc version 12.2.0\n", "580.95.05"},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)\nGCC version: gcc 13.3.0\n", "580.159.04"},
		{"garbage\n", ""},
		{"", ""},
	} {
		if got := kernelModuleVersion(c.proc); got != c.want {
			t.Errorf("kernelModuleVersion(%q) = %q, want %q", c.proc, got, c.want)
		}
	}
}
