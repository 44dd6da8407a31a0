package nvrtc

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// RequireEnv makes the tests that need libnvrtc fail, not skip, where it
// is missing (CI installs it and sets it).
const RequireEnv = "GOFLASH_REQUIRE_NVRTC"

// lib is the process's NVRTC; the test skips without one unless
// RequireEnv is set.
func lib(t *testing.T) *Library {
	t.Helper()
	l, err := Load()
	if err != nil {
		if errors.Is(err, ErrNoNVRTC) && os.Getenv(RequireEnv) == "" {
			t.Skipf("no NVRTC (%s unset): %v", RequireEnv, err)
		}
		t.Fatal(err)
	}
	return l
}

func TestNVRTCOpenMissingLibrary(t *testing.T) {
	_, err := Open("/nonexistent/libnvrtc.so.12", "libgoflash-no-such-nvrtc.so")
	if !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("Open of missing files: %v, want ErrNoNVRTC", err)
	}
	for _, want := range []string{"/nonexistent/libnvrtc.so.12", LibraryEnv, "pip install nvidia-cuda-nvrtc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Open(); !errors.Is(err, ErrNoNVRTC) {
		t.Errorf("Open(): %v", err)
	}
	// GOFLASH_LIBNVRTC at a missing file: that path alone, and ErrNoNVRTC.
	t.Setenv(LibraryEnv, "/nonexistent/libnvrtc.so.12")
	if ps := LibraryPaths(nil); len(ps) != 1 {
		t.Errorf("LibraryPaths with %s set: %q", LibraryEnv, ps)
	} else if _, err := Open(ps...); !errors.Is(err, ErrNoNVRTC) {
		t.Errorf("Open(%q): %v", ps, err)
	}
	// A library that opens but is not NVRTC (libc) names the missing symbol.
	if runtime.GOOS == "linux" {
		if _, err := Open("libc.so.6"); err == nil || !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "nvrtc") {
			t.Errorf("Open(libc): %v", err)
		}
	}
	var nilLib *Library
	if _, err := nilLib.CompilePTX(Program{Source: "x"}, 80); !errors.Is(err, ErrNoNVRTC) {
		t.Errorf("CompilePTX on no library: %v", err)
	}
}

// LibraryPaths: the variable alone when set; else the names on the
// loader's path, then the files that exist where toolkits and wheels keep
// them (a fake file system here).
func TestNVRTCLibraryPaths(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	getenv := func(k string) string { return env[k] }
	files := map[string]bool{
		"/usr/local/cuda/lib64/libnvrtc.so.12":                                         true,
		"/usr/local/lib/python3.11/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12": true,
		"/home/u/.local/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13":   true,
	}
	glob := func(p string) []string {
		var out []string
		for f := range files {
			for d := filepath.Dir(f); d != "/"; d = filepath.Dir(d) {
				if ok, _ := filepath.Match(p, d); ok {
					out = append(out, d)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	ps := libraryPaths(getenv, glob, func(p string) bool { return files[p] })
	if ps[0] != "libnvrtc.so" || !slices.Contains(ps, "libnvrtc.so.11.2") {
		t.Errorf("paths %q: want the loader's names first", ps)
	}
	for f := range files {
		if !slices.Contains(ps, f) {
			t.Errorf("paths %q lack %s", ps, f)
		}
	}
	if len(ps) != 4+len(files) {
		t.Errorf("paths %q: only existing files beyond the 4 names", ps)
	}
	env[LibraryEnv] = "/opt/x/libnvrtc.so.12"
	if ps := libraryPaths(getenv, glob, func(string) bool { return true }); len(ps) != 1 || ps[0] != env[LibraryEnv] {
		t.Errorf("with %s: %q", LibraryEnv, ps)
	}
}

// IncludeDirs: beside the library first (a wheel's cuda_runtime/include),
// then the usual places; the variable alone when set.
func TestNVRTCIncludeDirs(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	has := map[string]bool{
		"/sp/nvidia/cuda_runtime/include/cuda_fp16.h": true,
		"/usr/local/cuda/include/cuda_fp16.h":         true,
		"/usr/include/cuda_fp16.h":                    true,
	}
	exists := func(p string) bool { return has[p] }
	none := func(string) []string { return nil }
	ds := includeDirs("/sp/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", getenv, none, exists)
	if want := []string{"/sp/nvidia/cuda_runtime/include", "/usr/local/cuda/include", "/usr/include"}; !slices.Equal(ds, want) {
		t.Errorf("include dirs %q, want %q", ds, want)
	}
	ds = includeDirs("/usr/local/cuda/lib64/libnvrtc.so.12", getenv, none, exists)
	if len(ds) == 0 || ds[0] != "/usr/local/cuda/include" {
		t.Errorf("include dirs %q: want the toolkit's own first", ds)
	}
	env[IncludeEnv] = "/x/include"
	if ds := includeDirs("", getenv, none, exists); !slices.Equal(ds, []string{"/x/include"}) {
		t.Errorf("with %s: %q", IncludeEnv, ds)
	}
}

func TestNVRTCParseLog(t *testing.T) {
	log := `ladder/rung4_ldmatrix.cuh(37): error: identifier "frob" is undefined

mask.cuh(12): warning #177-D: variable "z" was declared but never referenced
goflash_rung4.cu(3): catastrophic error: cannot open source file "nope.cuh"

3 errors detected in the compilation of "goflash_rung4.cu".`
	got := ParseLog(log)
	want := []Diagnostic{
		{"ladder/rung4_ldmatrix.cuh", 37, "error", `identifier "frob" is undefined`},
		{"mask.cuh", 12, "warning", `variable "z" was declared but never referenced`},
		{"goflash_rung4.cu", 3, "catastrophic error", `cannot open source file "nope.cuh"`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ParseLog = %+v, want %+v", got, want)
	}
	e := &CompileError{Program: "p.cu", Arch: 80, Log: log, Lines: got,
		sources: map[string]string{"ladder/rung4_ldmatrix.cuh": strings.Repeat("x\n", 36) + "\tfrob(1);\n"}}
	if n := len(e.Errors()); n != 2 {
		t.Errorf("Errors() = %d, want 2", n)
	}
	if s := e.Error(); !strings.Contains(s, "compute_80") || !strings.Contains(s, "     37 |     frob(1);") {
		t.Errorf("Error() does not quote line 37:\n%s", s)
	}
}

// A compile error's log points at the file and line of the mistake, and
// Error() quotes that line.
func TestNVRTCCompileErrorLine(t *testing.T) {
	l := lib(t)
	src := "__global__ void k(float* p) {\n  p[0] = 1.f;\n  p[1] = undefined_thing;\n}\n"
	_, err := l.CompilePTX(Program{Name: "broken.cu", Source: src}, 80)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("broken source: %v, want a *CompileError", err)
	}
	errs := ce.Errors()
	if len(errs) != 1 || errs[0].File != "broken.cu" || errs[0].Line != 3 || !strings.Contains(errs[0].Message, "undefined_thing") {
		t.Fatalf("diagnostics %+v, want one error at broken.cu(3); log:\n%s", ce.Lines, ce.Log)
	}
	if s := err.Error(); !strings.Contains(s, "broken.cu(3)") || !strings.Contains(s, "3 |   p[1] = undefined_thing;") {
		t.Errorf("Error():\n%s", s)
	}
}

// Headers by name, quoted includes resolved beside the including header
// (one name per file, so #pragma once holds), and the standard headers.
func TestNVRTCCompileHeaders(t *testing.T) {
	l := lib(t)
	hs := append(StdHeaders(),
		Header{"dir/a.h", "#pragma once\n#include \"b.h\"\n#include \"../c.h\"\n"},
		Header{"dir/b.h", "#pragma once\n#include \"../c.h\"\n__device__ int from_b = C_VALUE;\n"},
		Header{"c.h", "#pragma once\n#define C_VALUE 7\nstruct S { long long a; int b; };\n"},
	)
	src := `#include <cstdint>
#include <cstddef>
#include <cmath>
#include <type_traits>
#include "dir/a.h"
#include "c.h"
static_assert(offsetof(S, b) == 8, "offsetof");
static_assert(sizeof(int64_t) == 8 && sizeof(uint32_t) == 4, "stdint");
static_assert(std::is_same<std::conditional_t<true, int, float>, int>::value, "traits");
static_assert(std::integral_constant<int, 3>::value == 3 && !std::is_same_v<int, float>, "traits");
extern "C" __global__ void k(float* p) { p[0] = -INFINITY; p[1] = (float)from_b; }
`
	out, err := l.CompilePTX(Program{Name: "h.cu", Source: src, Headers: hs, Options: []string{"-std=c++17"}}, 75)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(out.PTX)
	if !strings.Contains(ptx, ".target sm_75") || !strings.Contains(ptx, ".entry k(") || out.PTX[len(out.PTX)-1] != 0 {
		t.Errorf("PTX lacks .target sm_75 or the entry k, or its NUL:\n%.600s", ptx)
	}
	t.Logf("NVRTC %s (%s), archs %v, PTX %d bytes", l.VersionString(), l.Path(), l.SupportedArchs(), len(out.PTX))
}

func TestNVRTCArchError(t *testing.T) {
	l := lib(t)
	_, err := l.CompilePTX(Program{Name: "a.cu", Source: "__global__ void k() {}\n"}, 999)
	var ae *ArchError
	if !errors.As(err, &ae) || !errors.Is(err, ErrArch) || ae.Arch != 999 {
		t.Fatalf("compute_999: %v, want an *ArchError", err)
	}
	if !strings.Contains(err.Error(), "compute_999") || !strings.Contains(err.Error(), l.VersionString()) {
		t.Errorf("ArchError says %q", err)
	}
	if l.SupportedArchs() != nil && (!l.Supports(75) || !l.Supports(80) || l.MaxArch() < 80) {
		t.Errorf("NVRTC %s supports %v: not 75 and 80", l.VersionString(), l.SupportedArchs())
	}
}

// The cache compiles a program once per (sources, options, arch, NVRTC):
// the second call and a second cache on the same directory answer without
// NVRTC; another arch or source compiles; a torn file compiles again.
func TestNVRTCCache(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	c := NewCache(dir)
	p := Program{Name: "c.cu", Source: "extern \"C\" __global__ void k(int* p) { p[0] = 1; }\n"}
	a, cached, err := c.CompilePTX(l, p, 80)
	if err != nil || cached {
		t.Fatalf("first compile: cached %v, %v", cached, err)
	}
	b, cached, err := c.CompilePTX(l, p, 80)
	if err != nil || !cached || string(a.PTX) != string(b.PTX) || c.Compiles() != 1 || c.Hits() != 1 {
		t.Fatalf("second compile: cached %v, %d compiles, %d hits, same PTX %v, %v", cached, c.Compiles(), c.Hits(), string(a.PTX) == string(b.PTX), err)
	}
	if len(c.Entries()) != 1 || c.Entries()[0] != Key(l, p, 80) {
		t.Errorf("disk entries %q, want the key %s", c.Entries(), Key(l, p, 80))
	}
	c2 := NewCache(dir)
	d, cached, err := c2.CompilePTX(l, p, 80)
	if err != nil || !cached || c2.Compiles() != 0 || string(d.PTX) != string(a.PTX) {
		t.Fatalf("a new cache on the same directory: cached %v, %d compiles, %v", cached, c2.Compiles(), err)
	}
	if _, cached, err := c.CompilePTX(l, p, 75); err != nil || cached {
		t.Errorf("another arch: cached %v, %v", cached, err)
	}
	p2 := p
	p2.Source += "// changed\n"
	if _, cached, err := c.CompilePTX(l, p2, 80); err != nil || cached {
		t.Errorf("another source: cached %v, %v", cached, err)
	}
	if err := os.WriteFile(filepath.Join(dir, Key(l, p, 80)+".ptx"), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	c3 := NewCache(dir)
	if _, cached, err := c3.CompilePTX(l, p, 80); err != nil || cached || c3.Compiles() != 1 {
		t.Errorf("over a torn entry: cached %v, %d compiles, %v", cached, c3.Compiles(), err)
	}
	// Failed compiles are not kept.
	bad := Program{Name: "bad.cu", Source: "nonsense\n"}
	for range 2 {
		if _, _, err := c.CompilePTX(l, bad, 80); !errors.As(err, new(*CompileError)) {
			t.Fatalf("bad source: %v", err)
		}
	}
	if c.Compiles() != 5 {
		t.Errorf("%d compiles, want 5 (a failure compiles every time)", c.Compiles())
	}
}

func TestNVRTCKeyCoversInputs(t *testing.T) {
	p := Program{Name: "a.cu", Source: "s", Headers: []Header{{"h", "1"}, {"g", "2"}}, Options: []string{"-std=c++17"}}
	k := Key(nil, p, 80)
	q := p
	q.Headers = []Header{{"g", "2"}, {"h", "1"}}
	if Key(nil, q, 80) != k {
		t.Error("header order changes the key")
	}
	for i, f := range []func(*Program){
		func(p *Program) { p.Source = "t" },
		func(p *Program) { p.Name = "b.cu" },
		func(p *Program) { p.Headers = []Header{{"h", "1"}, {"g", "3"}} },
		func(p *Program) { p.Options = nil },
	} {
		r := p
		r.Headers = append([]Header(nil), p.Headers...)
		f(&r)
		if Key(nil, r, 80) == k {
			t.Errorf("change %d keeps the key", i)
		}
	}
	if Key(nil, p, 75) == k {
		t.Error("arch keeps the key")
	}
}

func TestNVRTCDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheEnv, "off")
	if d := DefaultCacheDir(); d != "" {
		t.Errorf("%s=off: %q", CacheEnv, d)
	}
	t.Setenv(CacheEnv, "/tmp/x")
	if d := DefaultCacheDir(); d != "/tmp/x" {
		t.Errorf("%s=/tmp/x: %q", CacheEnv, d)
	}
	t.Setenv(CacheEnv, "")
	if d := DefaultCacheDir(); d != "" && !strings.HasSuffix(d, filepath.Join("goflash", "nvrtc")) {
		t.Errorf("default: %q", d)
	}
}
