package flashattn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// grid draws a trace's steps, one line per Q block: C computed, M masked,
// S skipped.
func grid(tr *flashattn.Trace) string {
	var b strings.Builder
	for i := 0; i < tr.Tr; i++ {
		if i > 0 {
			b.WriteByte('/')
		}
		for j := 0; j < tr.Tc; j++ {
			k, ok := tr.Kind(i, j)
			switch {
			case !ok:
				b.WriteByte('?')
			case k == flashattn.StepComputed:
				b.WriteByte('C')
			case k == flashattn.StepMasked:
				b.WriteByte('M')
			default:
				b.WriteByte('S')
			}
		}
	}
	return b.String()
}

func traced(t *testing.T, d flashattn.Dims, o flashattn.Options, tr *flashattn.Trace) (*flashattn.Result, *flashattn.Tensor, *flashattn.Tensor) {
	t.Helper()
	q := flashattn.Random(d.QShape(), 1)
	k := flashattn.Random(d.KVShape(), 2)
	v := flashattn.Random(d.KVShape(), 3)
	o.Trace = tr
	res, err := flashattn.Forward(q, k, v, &o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != flashattn.CPUFlash {
		t.Fatalf("a traced call ran on %v, want cpu-flash", res.Backend)
	}
	return res, q, k
}

// TestTraceSteps pins the causal skipping pattern of small grids, worked out
// by hand (bottom-right aligned diagonal, 4x4 tiles).
func TestTraceSteps(t *testing.T) {
	for _, c := range []struct {
		name   string
		nq, nk int
		causal bool
		want   string
	}{
		{"square", 10, 10, true, "MSS/CMS/CCM"},
		{"Nq<Nk", 6, 10, true, "CMS/CCM"}, // row i sees keys <= i+4
		{"Nq>Nk", 10, 4, true, "S/M/M"},   // rows 0..5 see no key
		{"not-causal", 6, 10, false, "CCC/CCC"},
		{"ragged-1", 9, 9, true, "MSS/CMS/CCC"}, // the 1x1 corner tile (row 8, key 8) is wholly visible
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := &flashattn.Trace{Batch: 1, Head: 2, Row: c.nq - 1}
			d := flashattn.Dims{B: 2, Nq: c.nq, Nk: c.nk, Hq: 4, Hkv: 2, D: 8}
			traced(t, d, flashattn.Options{Causal: c.causal, BlockQ: 4, BlockK: 4, Workers: 3}, tr)
			if got := grid(tr); got != c.want {
				t.Errorf("steps %s, want %s", got, c.want)
			}
			if tr.Br != 4 || tr.Bc != 4 || len(tr.Steps) != tr.Tr*tr.Tc {
				t.Errorf("Br=%d Bc=%d Tr=%d Tc=%d with %d steps", tr.Br, tr.Bc, tr.Tr, tr.Tc, len(tr.Steps))
			}
			for n, s := range tr.Steps { // sorted by (QBlock, KBlock), as documented
				if s.QBlock != n/tr.Tc || s.KBlock != n%tr.Tc {
					t.Fatalf("step %d is (%d,%d), want (%d,%d)", n, s.QBlock, s.KBlock, n/tr.Tc, n%tr.Tc)
				}
			}
			// Order counts the work of a Q block; skipped steps are no work.
			next := map[int]int{}
			for _, s := range tr.Steps {
				want := -1
				if s.Kind != flashattn.StepSkipped {
					want = next[s.QBlock]
					next[s.QBlock]++
				}
				if s.Order != want {
					t.Errorf("step (%d,%d) %v has Order %d, want %d", s.QBlock, s.KBlock, s.Kind, s.Order, want)
				}
			}
		})
	}
}

// TestTraceKindsMatchMask compares every step's kind with the element mask
// (j visible from i iff j <= i + Nk - Nq) over random shapes and tiles.
func TestTraceKindsMatchMask(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 60 {
		d := flashattn.Dims{B: 1, Nq: 1 + r.IntN(40), Nk: 1 + r.IntN(40), Hq: 1, Hkv: 1, D: 4}
		br, bc := 1+r.IntN(9), 1+r.IntN(9)
		tr := &flashattn.Trace{Row: r.IntN(d.Nq)}
		traced(t, d, flashattn.Options{Causal: true, BlockQ: br, BlockK: bc, Workers: 4}, tr)
		for n, s := range tr.Steps {
			if s.QBlock != n/tr.Tc || s.KBlock != n%tr.Tc {
				t.Fatalf("%+v Br=%d Bc=%d: step %d is (%d,%d): not sorted", d, br, bc, n, s.QBlock, s.KBlock)
			}
			seen, hidden := 0, 0
			for i := s.QBlock * br; i < min((s.QBlock+1)*br, d.Nq); i++ {
				for j := s.KBlock * bc; j < min((s.KBlock+1)*bc, d.Nk); j++ {
					if j <= i+d.Nk-d.Nq {
						seen++
					} else {
						hidden++
					}
				}
			}
			want := flashattn.StepMasked
			if seen == 0 {
				want = flashattn.StepSkipped
			} else if hidden == 0 {
				want = flashattn.StepComputed
			}
			if s.Kind != want {
				t.Fatalf("%+v Br=%d Bc=%d: step (%d,%d) is %v, want %v", d, br, bc, s.QBlock, s.KBlock, s.Kind, want)
			}
		}
	}
}

// TestTraceRow checks the online-softmax state of the traced row after each
// K block against a float64 recomputation from the inputs, and that its
// final M and L give the LSE Forward returned.
func TestTraceRow(t *testing.T) {
	d := flashattn.Dims{B: 2, Nq: 50, Nk: 70, Hq: 4, Hkv: 2, D: 16}
	const bc = 16
	for _, row := range []int{0, 13, 49} {
		tr := &flashattn.Trace{Batch: 1, Head: 3, Row: row}
		res, q, k := traced(t, d, flashattn.Options{Causal: true, Scale: 0.7, BlockQ: 8, BlockK: bc}, tr)
		last := row + d.Nk - d.Nq // the last key the row sees
		// Blocks the row's Q block visits: those up to the block holding the
		// last key its last row sees.
		blockLast := min((row/8+1)*8, d.Nq) - 1 + d.Nk - d.Nq
		if n := len(tr.RowSteps); n != blockLast/bc+1 {
			t.Fatalf("row %d: %d row steps, want %d", row, n, blockLast/bc+1)
		}
		m, prevM := math.Inf(-1), math.Inf(-1)
		for j, s := range tr.RowSteps {
			if s.KBlock != j {
				t.Fatalf("row %d: step %d is K block %d", row, j, s.KBlock)
			}
			// The same state in float64, from the keys seen up to block j.
			l := 0.0
			seen := min((j+1)*bc, last+1)
			for key := 0; key < seen; key++ {
				m = math.Max(m, 0.7*dot64(q.Row(1, row, 3), k.Row(1, key, 1)))
			}
			for key := 0; key < seen; key++ {
				l += math.Exp(0.7*dot64(q.Row(1, row, 3), k.Row(1, key, 1)) - m)
			}
			if !near(s.M, m) || !near(s.L, l) || !near(s.Rescale, math.Exp(prevM-s.M)) && s.M != prevM {
				t.Errorf("row %d block %d: m=%v l=%v rescale=%v, want m=%v l=%v rescale=%v",
					row, j, s.M, s.L, s.Rescale, m, l, math.Exp(prevM-m))
			}
			prevM = s.M
		}
		lse := float64(res.LSE[d.LSEIndex(1, 3, row)])
		if got := tr.M + math.Log(tr.L); math.Abs(got-lse) > 4*0x1p-24*math.Abs(lse) {
			t.Errorf("row %d: M + log(L) = %v, LSE = %v", row, got, lse)
		}
	}
}

// TestTraceMaskedRow: a row that sees no key keeps m = -Inf, l = 0 and
// gets LSE -Inf, whether its Q block is skipped or visited for other rows.
func TestTraceMaskedRow(t *testing.T) {
	d := flashattn.Dims{B: 1, Nq: 20, Nk: 13, Hq: 1, Hkv: 1, D: 8} // row i sees keys <= i-7
	o := flashattn.Options{Causal: true, BlockQ: 4, BlockK: 4}
	// Row 2: its whole Q block (rows 0..3) sees no key, every step is skipped.
	tr := &flashattn.Trace{Row: 2}
	res, _, _ := traced(t, d, o, tr)
	if len(tr.RowSteps) != 0 || !math.IsInf(tr.M, -1) || tr.L != 0 || !math.IsInf(float64(res.LSE[2]), -1) {
		t.Errorf("row 2: row steps %+v, M %v, L %v, LSE %v", tr.RowSteps, tr.M, tr.L, res.LSE[2])
	}
	// Row 6: its Q block (rows 4..7) visits K block 0 for row 7's sake.
	tr = &flashattn.Trace{Row: 6}
	res, _, _ = traced(t, d, o, tr)
	if len(tr.RowSteps) != 1 || !math.IsInf(tr.RowSteps[0].M, -1) || tr.RowSteps[0].L != 0 || tr.RowSteps[0].Rescale != 1 ||
		!math.IsInf(tr.M, -1) || !math.IsInf(float64(res.LSE[6]), -1) {
		t.Errorf("row 6: row steps %+v, M %v, LSE %v", tr.RowSteps, tr.M, res.LSE[6])
	}
	// Row 7 sees key 0 only: m is its score, l = 1, rescale exp(-Inf) = 0.
	tr = &flashattn.Trace{Row: 7}
	traced(t, d, o, tr)
	if len(tr.RowSteps) != 1 || math.IsInf(tr.M, 0) || tr.L != 1 || tr.RowSteps[0].Rescale != 0 {
		t.Errorf("row 7: row steps %+v, M %v, L %v", tr.RowSteps, tr.M, tr.L)
	}
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-5*math.Max(math.Abs(a), math.Abs(b))
}

func dot64(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
