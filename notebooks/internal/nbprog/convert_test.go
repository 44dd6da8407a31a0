package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func nbJSON(t *testing.T, cells ...string) []byte {
	t.Helper()
	type cell struct {
		Type   string   `json:"cell_type"`
		Source []string `json:"source"`
	}
	var nb struct {
		Cells []cell `json:"cells"`
	}
	nb.Cells = append(nb.Cells, cell{"markdown", []string{"# title\n", "%% not code\n"}})
	for _, c := range cells {
		nb.Cells = append(nb.Cells, cell{"code", strings.SplitAfter(c, "\n")})
	}
	b, err := json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// build compiles src (in the module, so that it can import viz) and runs it.
func build(t *testing.T, src []byte, env ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a program")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s\n%s", err, out, src)
	}
	run := exec.Command(bin)
	run.Env = append(os.Environ(), append(env, "NBPROG_HTML="+filepath.Join(dir, "charts.html"))...)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("program: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "charts.html")); err != nil {
		t.Errorf("no chart report: %v", err)
	}
	return string(out)
}

func TestConvertKeepsGoNBMeaning(t *testing.T) {
	src, err := convert("x.ipynb", nbJSON(t,
		"!echo shell; bash setup.sh",
		"import (\n\t\"fmt\"\n\t\"strings\"\n)\n\n// greet is replaced below.\nfunc greet() string { return \"old\" }",
		"import \"github.com/goflash/goflash/viz/nb\"\n\nfunc greet() string { return strings.ToUpper(\"new\") }",
		"%env FOO 1\n%%\nfmt.Println(\"first\", greet())\nif true {\n\treturn // ends this cell only\n}\nfmt.Println(\"not printed\")",
		"// before the body\n%%\ncheck := nb.Display()\nfmt.Println(\"second\", check == nil)",
	))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, want := range []string{"//\tcell 1: !echo shell; bash setup.sh", "//\tcell 4: %env FOO 1", "func nbprogCell4() {", "func nbprogCell5() {",
		"nbprogDisplay()"} {
		if !strings.Contains(s, want) {
			t.Errorf("program lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"old"`) || strings.Contains(s, "viz/nb") {
		t.Errorf("redefined func or viz/nb import left in:\n%s", s)
	}
	out := build(t, src)
	if want := "== cell 4 ==\nfirst NEW\n== cell 5 ==\nsecond true\ncharts written to"; !strings.Contains(out, want) {
		t.Errorf("output %q, want it to contain %q", out, want)
	}
}

func TestConvertRefuses(t *testing.T) {
	for name, data := range map[string][]byte{
		"not json":   []byte("{"),
		"no %% cell": nbJSON(t, "func f() {}"),
		"bad Go":     nbJSON(t, "func (", "%%\nreturn"),
	} {
		if _, err := convert(name, data); err == nil {
			t.Errorf("%s: converted", name)
		}
	}
}

// Notebooks 06 and 07 become programs that build and, on this machine (CPU
// paths; PyTorch answered by benchtest as on a T4), run to the end.
func TestNotebooks06And07Run(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "fakesdpa")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", fake, "./bench/benchtest/fakesdpa")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if testing.Short() {
		t.Skip("builds and runs two notebooks")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for nb, want := range map[string]string{
		"06_cuda_from_go.ipynb": "== cell 12 ==",
		"07_benchmarks.ipynb":   "Speedups below are over PyTorch SDPA memory-efficient (flash unsupported",
	} {
		data, err := os.ReadFile(filepath.Join(root, "notebooks", nb))
		if err != nil {
			t.Fatal(err)
		}
		src, err := convert(nb, data)
		if err != nil {
			t.Fatal(err)
		}
		out := build(t, src, "GOFLASH_CPU_OK=1", "GOFLASH_PYTHON="+fake, "GOFLASH_FAKE_SDPA=t4")
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", nb, want, out)
		}
	}
}
