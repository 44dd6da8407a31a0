package flashattn_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// requireNVRTC names the variable that makes the NVRTC tests fail, not
// skip, where libnvrtc is missing (CI sets it: it installs CUDA 11.8's).
const requireNVRTC = "GOFLASH_REQUIRE_NVRTC"

// needNVRTC skips the test where NVRTC is missing, or cannot compile a rung
// (a libnvrtc without the CUDA headers, as a lone pip wheel has), unless
// requireNVRTC is set.
func needNVRTC(t *testing.T) {
	t.Helper()
	v, path, err := flashattn.NVRTCVersion()
	if err == nil {
		_, err = flashattn.CompileRung(1, flashattn.RungSource(1), 75)
	}
	if err != nil {
		if errors.Is(err, flashattn.ErrNoNVRTC) && os.Getenv(requireNVRTC) == "" {
			t.Skipf("no NVRTC (%s unset): %v", requireNVRTC, err)
		}
		t.Fatal(err)
	}
	t.Logf("NVRTC %s (%s)", v, path)
}

// freshCache gives the test a rung cache of its own (memory only).
func freshCache(t *testing.T) interface{ Compiles() int } {
	c, restore := flashattn.UseNVRTCCache("")
	t.Cleanup(restore)
	return c
}

// noSwizzle is rung 4's source with the swizzle removed the way a learner
// can in the rung's own file: Swizzle<64> specialised (after the includes
// that declare it, before any use) to store rows plainly, key 0.
func noSwizzle(t *testing.T) string {
	t.Helper()
	src := flashattn.RungSource(4)
	const anchor = "#include \"../gemm.cuh\"\n"
	if !strings.Contains(src, anchor) {
		t.Fatalf("rung 4's source has no %q line", anchor)
	}
	return strings.Replace(src, anchor, anchor+`
// No swizzle: every row's chunks where they are, so the 8 rows one ldmatrix
// reads share their banks.
template <>
struct Swizzle<64> {
  static constexpr int kChunks = 8;
  __device__ __forceinline__ static int key(int) { return 0; }
  __device__ __forceinline__ static int offset(int row, int c) { return row * 64 + (c << 3); }
};
`, 1)
}

// The sources a learner edits are the shipped files, by the names the
// ladder gives them.
func TestNVRTCRungSources(t *testing.T) {
	for _, s := range flashattn.Ladder() {
		f := flashattn.RungFile(s.Rung)
		if "kernels/"+f != s.Source {
			t.Errorf("rung %d: RungFile %q, Ladder's Source %q", s.Rung, f, s.Source)
		}
		want, err := os.ReadFile("../" + s.Source)
		if err != nil {
			t.Fatal(err)
		}
		if flashattn.RungSource(s.Rung) != string(want) {
			t.Errorf("RungSource(%d) is not %s", s.Rung, s.Source)
		}
	}
	if flashattn.RungSource(0) != "" || flashattn.RungSource(len(flashattn.Ladder())+1) != "" || flashattn.RungFile(9) != "" {
		t.Error("a rung that does not exist has a source")
	}
	names := flashattn.KernelSourceNames()
	for _, n := range []string{"traits.cuh", "params.cuh", "fwd.cuh", "ladder/common.cuh", "ladder/rung4_ldmatrix.cuh"} {
		if !slices.Contains(names, n) || flashattn.KernelSource(n) == "" {
			t.Errorf("KernelSourceNames %q lacks %s", names, n)
		}
	}
	if flashattn.KernelSource("nope.cuh") != "" {
		t.Error("KernelSource of a missing file")
	}
}

// Every shipped rung source compiles with NVRTC for compute_75 and
// compute_80 into the kernels the table lists, with the table's tiles:
// NVRTC builds what nvcc built.
func TestNVRTCCompilesShippedRungs(t *testing.T) {
	needNVRTC(t)
	freshCache(t)
	last := len(flashattn.Ladder())
	for _, arch := range []int{75, 80} {
		for _, s := range flashattn.Ladder() {
			t.Run(fmt.Sprintf("compute_%d/rung%d", arch, s.Rung), func(t *testing.T) {
				b, err := flashattn.CompileRung(s.Rung, flashattn.RungSource(s.Rung), arch)
				if err != nil {
					t.Fatal(err)
				}
				want := s.Kernels
				if s.Rung == last {
					want = nil
					for _, k := range flashattn.KernelTable(arch) {
						if k.Pass == "fwd" {
							want = append(want, k)
						}
					}
				}
				if len(b.Kernels) != len(want) || b.Arch != arch || b.Rung != s.Rung || len(b.Edited) != 0 || b.Cached {
					t.Fatalf("build: rung %d arch %d, %d kernels (want %d), edited %q, cached %v", b.Rung, b.Arch, len(b.Kernels), len(want), b.Edited, b.Cached)
				}
				for i, k := range b.Kernels {
					w := want[i]
					if k.Symbol != w.Symbol || k.HeadDim != w.HeadDim || k.Causal != w.Causal || k.Br != w.Br || k.Bc != w.Bc || k.Warps != w.Warps || k.SmemBytes != w.SmemBytes || k.Loaded {
						t.Errorf("kernel %d: %+v, table %+v", i, k.KernelInfo, w)
					}
					if !strings.Contains(b.PTX, ".entry "+k.Symbol+"(") || !strings.Contains(b.PTX, fmt.Sprintf(".maxntid %d, 1, 1", 32*k.Warps)) {
						t.Errorf("PTX lacks .entry %s( with .maxntid %d", k.Symbol, 32*k.Warps)
					}
				}
				if !strings.Contains(b.PTX, fmt.Sprintf(".target sm_%d", arch)) {
					t.Errorf("PTX is not for sm_%d", arch)
				}
				t.Logf("NVRTC %s: %d kernels, %d KiB of PTX in %v", b.NVRTC, len(b.Kernels), len(b.PTX)>>10, b.CompileTime)
			})
		}
	}
}

// A mistake in the edited source is a *CompileError whose diagnostic names
// the rung's file and the line of the mistake, and whose message quotes it.
func TestNVRTCCompileErrorLine(t *testing.T) {
	needNVRTC(t)
	src := flashattn.RungSource(4)
	lines := strings.Split(src, "\n")
	n := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "sm.step(s, o, p.scale_log2);") })
	if n < 0 {
		t.Fatal("rung 4 has no sm.step line")
	}
	lines[n] = strings.Replace(lines[n], "sm.step(", "sm.stepp(", 1)
	_, err := flashattn.CompileRung(4, strings.Join(lines, "\n"), 80)
	var ce *flashattn.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("broken rung 4: %v, want a *CompileError", err)
	}
	var at []flashattn.CompileDiagnostic
	for _, d := range ce.Errors() {
		if d.File == "ladder/rung4_ldmatrix.cuh" && d.Line == n+1 {
			at = append(at, d)
		}
	}
	if len(at) == 0 || !strings.Contains(at[0].Message, "stepp") {
		t.Fatalf("no error at ladder/rung4_ldmatrix.cuh(%d) naming stepp; diagnostics %+v\nlog:\n%s", n+1, ce.Lines, ce.Log)
	}
	msg := err.Error()
	if !strings.Contains(msg, fmt.Sprintf("ladder/rung4_ldmatrix.cuh(%d)", n+1)) || !strings.Contains(msg, fmt.Sprintf("%d | %s", n+1, lines[n])) {
		t.Errorf("message does not show line %d:\n%s", n+1, msg)
	}
	t.Logf("%s", msg)
}

// The learner's edits: the swizzle removed in rung 4's own file, or in
// traits.cuh; a bigger tile; the shipped kernel's cp.async double buffer
// dropped (traits.cuh's D64 row single-buffered). Each compiles, and the
// build reports the tile the edit declares.
func TestNVRTCEdits(t *testing.T) {
	needNVRTC(t)
	freshCache(t)
	ship, err := flashattn.CompileRung(4, flashattn.RungSource(4), 80)
	if err != nil {
		t.Fatal(err)
	}
	b, err := flashattn.CompileRung(4, noSwizzle(t), 80)
	if err != nil {
		t.Fatalf("rung 4 without the swizzle: %v", err)
	}
	if b.PTX == ship.PTX || !slices.Equal(b.Edited, []string{"ladder/rung4_ldmatrix.cuh"}) {
		t.Errorf("no-swizzle build: edited %q, PTX differs %v", b.Edited, b.PTX != ship.PTX)
	}
	traits := flashattn.KernelSource("traits.cuh")
	const key = "return (kChunks % 8 == 0) ? (row & 7) : ((row >> 1) & 3);"
	if !strings.Contains(traits, key) {
		t.Fatalf("traits.cuh has no %q", key)
	}
	tb, err := flashattn.CompileRungFiles(4, map[string]string{"traits.cuh": strings.Replace(traits, key, "return 0;", 1)}, 80)
	if err != nil || !slices.Equal(tb.Edited, []string{"traits.cuh"}) || tb.PTX == ship.PTX {
		t.Fatalf("rung 4 with traits.cuh's swizzle removed: %v (edited %v)", err, tb)
	}
	const tile = "static constexpr int kBr = 64, kBc = 64, kThreads = 128;"
	big := strings.Replace(flashattn.RungSource(4), tile, "static constexpr int kBr = 128, kBc = 64, kThreads = 256;", 1)
	if big == flashattn.RungSource(4) {
		t.Fatalf("rung 4 has no %q", tile)
	}
	bb, err := flashattn.CompileRung(4, big, 75)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := bb.Kernel(64, true); !ok || k.Br != 128 || k.Warps != 8 || k.Bc != 64 || !strings.Contains(bb.PTX, ".maxntid 256, 1, 1") {
		t.Errorf("Br 128 x 8 warps: %+v", k)
	}
	// The shipped kernel's D64 row on the sm_80 path, single-buffered (one
	// stage, so one split): 80 KiB of shared memory becomes 48.
	const row = "X(80, 64, 128, 128, 4, 2, 2, true, 1)"
	if !strings.Contains(traits, row) {
		t.Fatalf("traits.cuh has no %q", row)
	}
	last := len(flashattn.Ladder())
	sb, err := flashattn.CompileRungFiles(last, map[string]string{"traits.cuh": strings.Replace(traits, row, "X(80, 64, 128, 128, 4, 1, 1, true, 1)", 1)}, 80)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := sb.Kernel(64, false); !ok || k.SmemBytes != 48<<10 || k.Symbol != "fa2_fwd_sm80_d64" {
		t.Errorf("single-buffered D64: %+v", k)
	}
	for _, w := range flashattn.KernelTable(80) {
		if k, ok := sb.Kernel(w.HeadDim, w.Causal); w.HeadDim != 64 && w.Pass == "fwd" && (!ok || k.SmemBytes != w.SmemBytes || k.Br != w.Br) {
			t.Errorf("D%d untouched: %+v, table %+v", w.HeadDim, k, w)
		}
	}
}

// The cache answers a source compiled before without NVRTC, per arch.
func TestNVRTCCache(t *testing.T) {
	needNVRTC(t)
	c := freshCache(t)
	src := noSwizzle(t)
	a, err := flashattn.CompileRung(4, src, 80)
	if err != nil {
		t.Fatal(err)
	}
	b, err := flashattn.CompileRung(4, src, 80)
	if err != nil {
		t.Fatal(err)
	}
	if a.Cached || !b.Cached || b.PTX != a.PTX || b.CompileTime != 0 || c.Compiles() != 1 {
		t.Fatalf("twice: cached %v then %v, same PTX %v, %d compiles (want 1)", a.Cached, b.Cached, a.PTX == b.PTX, c.Compiles())
	}
	if _, err := flashattn.CompileRung(4, src, 75); err != nil || c.Compiles() != 2 {
		t.Fatalf("compute_75: %v, %d compiles (want 2)", err, c.Compiles())
	}
	if _, err := flashattn.CompileRung(4, src+"\n// an edit\n", 80); err != nil || c.Compiles() != 3 {
		t.Fatalf("edited: %v, %d compiles (want 3)", err, c.Compiles())
	}
}

// What is refused before NVRTC runs: rungs and files that do not exist,
// empty sources, architectures below Turing.
func TestNVRTCRefusals(t *testing.T) {
	if _, err := flashattn.CompileRung(len(flashattn.Ladder())+1, "x", 80); !errors.As(err, new(*flashattn.UnsupportedError)) {
		t.Errorf("rung %d: %v", len(flashattn.Ladder())+1, err)
	}
	if _, err := flashattn.CompileRungFiles(4, map[string]string{"nope.cuh": "x"}, 80); err == nil || !strings.Contains(err.Error(), "nope.cuh") {
		t.Errorf("unknown file: %v", err)
	}
	if _, err := flashattn.CompileRung(4, " \n", 80); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty source: %v", err)
	}
	if _, err := flashattn.CompileRung(4, flashattn.RungSource(4), 70); !errors.As(err, new(*flashattn.UnsupportedError)) {
		t.Errorf("compute_70: %v", err)
	}
}

// An NVRTC too old for the architecture asked for is an *NVRTCArchError.
func TestNVRTCArchTooNew(t *testing.T) {
	needNVRTC(t)
	_, err := flashattn.CompileRung(4, flashattn.RungSource(4), 990)
	var ae *flashattn.NVRTCArchError
	if !errors.As(err, &ae) || !errors.Is(err, flashattn.ErrNVRTCArch) || ae.Arch != 990 {
		t.Fatalf("compute_990: %v", err)
	}
}

// Without NVRTC (GOFLASH_LIBNVRTC at a missing file, in a process of its
// own: the library is loaded once per process) CompileRung's error wraps
// ErrNoNVRTC and says what to install.
func TestNVRTCMissingLibrary(t *testing.T) {
	if os.Getenv("GOFLASH_NVRTC_CHILD") == "1" {
		_, err := flashattn.CompileRung(4, flashattn.RungSource(4), 80)
		_, _, verr := flashattn.NVRTCVersion()
		if !errors.Is(err, flashattn.ErrNoNVRTC) || !errors.Is(verr, flashattn.ErrNoNVRTC) {
			t.Fatalf("CompileRung: %v; NVRTCVersion: %v; want ErrNoNVRTC", err, verr)
		}
		for _, want := range []string{"/nonexistent/libnvrtc.so.12", "GOFLASH_LIBNVRTC", "pip install nvidia-cuda-nvrtc"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNVRTCMissingLibrary$", "-test.v")
	cmd.Env = append(os.Environ(), "GOFLASH_NVRTC_CHILD=1", "GOFLASH_LIBNVRTC=/nonexistent/libnvrtc.so.12")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNVRTCMissingLibrary") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
