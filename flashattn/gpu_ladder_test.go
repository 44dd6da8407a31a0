package flashattn_test

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// The ladder's table needs no GPU: rungs 1..n in order, sources that exist,
// the last rung is the shipped kernel (its source, fwd.cuh).
func TestLadderTable(t *testing.T) {
	steps := flashattn.Ladder()
	if len(steps) < 2 || steps[len(steps)-1].Source != "kernels/fwd.cuh" {
		t.Fatalf("Ladder() = %+v: want rungs ending in the shipped kernel (kernels/fwd.cuh)", steps)
	}
	for i, s := range steps {
		if s.Rung != i+1 || s.Name == "" || s.Idea == "" {
			t.Errorf("step %d: %+v", i, s)
		}
		if _, err := os.Stat("../" + s.Source); err != nil {
			t.Errorf("rung %d: %v", s.Rung, err)
		}
	}
}

// excerpt matches a chapter-6 code excerpt: a "<!-- excerpt: FILE -->" line,
// then a fenced block whose lines are quoted from FILE.
var excerpt = regexp.MustCompile("(?s)<!-- excerpt: (\\S+) -->\\s*```\\w*\\n(.*?)```")

// Chapter 6 quotes the kernels of every rung: each quoted line must still be
// in its source, in the same order ("..." lines mark omissions), so the
// chapter cannot drift from kernels/.
func TestLadderExcerpts(t *testing.T) {
	doc, err := os.ReadFile("../tutorial/06-cuda-from-go.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]bool{}
	for _, m := range excerpt.FindAllStringSubmatch(string(doc), -1) {
		src, err := os.ReadFile("../" + m[1])
		if err != nil {
			t.Errorf("excerpt of %s: %v", m[1], err)
			continue
		}
		quoted[m[1]] = true
		rest := string(src)
		for l := range strings.Lines(m[2]) {
			l = strings.TrimSpace(l)
			if l == "" || l == "..." {
				continue
			}
			i := indexLine(rest, l)
			if i < 0 {
				t.Errorf("%s: quoted line %q is not in the source (after the previous quoted line)", m[1], l)
				break
			}
			rest = rest[i:]
		}
	}
	for _, s := range flashattn.Ladder() {
		if !quoted[s.Source] {
			t.Errorf("chapter 6 quotes nothing of rung %d (%s)", s.Rung, s.Source)
		}
	}
}

// indexLine finds a source line whose trimmed text is l, returning the offset
// just after it, or -1.
func indexLine(src, l string) int {
	off := 0
	for line := range strings.Lines(src) {
		off += len(line)
		if strings.TrimSpace(line) == l {
			return off
		}
	}
	return -1
}

// TestLadderConformance runs the conformance suite, forward, on every rung of
// the kernel ladder, on the device's own path and on the forced Turing path
// (the rungs compiled by the driver from the compute_75 PTX).
func TestLadderConformance(t *testing.T) {
	dev := openGPU(t)
	steps := flashattn.Ladder()
	if err := dev.UseRung(1); err != nil {
		t.Fatal(err)
	}
	ladderDims := dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil)
	for _, arch := range []int{0, 75} {
		if err := dev.ForceArch(arch); err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			name := fmt.Sprintf("arch%d/rung%d", arch, s.Rung)
			t.Run(name, func(t *testing.T) {
				if err := dev.UseRung(s.Rung); err != nil {
					t.Fatal(err)
				}
				b := deviceBackend(dev, "gpu-ladder-"+name)
				b.Backward = nil
				b.HeadDims = dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil)
				b.ModsForward = s.Rung == len(steps) // rungs 1-4 refuse score modifiers; the shipped kernel runs them
				if s.Rung == len(steps) {            // the shipped kernel: on the ladder's head dims (TestGPUConformance* has the rest)
					b.HeadDims = ladderDims
					fwd := b.Forward
					b.Forward = func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
						if q != nil && !slices.Contains(ladderDims, q.Shape.D) {
							return nil, &flashattn.UnsupportedError{Backend: flashattn.GPU, Feature: "head dim", Value: itoa(q.Shape.D), Reason: "not a ladder head dim (test wrapper)"}
						}
						return fwd(q, k, v, o)
					}
				}
				k, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: b.HeadDims[0]}, true)
				if err != nil {
					t.Fatal(err)
				}
				last := s.Rung == len(steps)
				if dev.Rung() != s.Rung || (k.Rung == 0) != last || (!last && k.Rung != s.Rung) || k.FromPTX != (arch == 75) {
					t.Fatalf("rung %d runs %+v", s.Rung, k)
				}
				t.Logf("%s: %s (%s), head dims %v", dev.Info(), k.Symbol, s.Name, b.HeadDims)
				attntest.Run(t, b)
			})
		}
	}
	if err := dev.UseRung(len(steps) + 1); !errors.As(err, new(*flashattn.UnsupportedError)) {
		t.Errorf("UseRung(%d): %v, want an *UnsupportedError", len(steps)+1, err)
	}
}

// The kernel ladder of tutorial chapter 6, listed without a GPU. On a
// Device, UseRung(r) makes Forward and BenchForward run rung r.
func ExampleLadder() {
	for _, s := range flashattn.Ladder() {
		fmt.Printf("%d %s: %s\n", s.Rung, s.Name, s.Source)
	}
	// Output:
	// 1 scalar: kernels/ladder/rung1_scalar.cuh
	// 2 shared memory: kernels/ladder/rung2_smem.cuh
	// 3 tensor cores: kernels/ladder/rung3_mma.cuh
	// 4 ldmatrix + swizzle: kernels/ladder/rung4_ldmatrix.cuh
	// 5 shipped: kernels/fwd.cuh
}
