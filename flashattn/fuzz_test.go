package flashattn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// Fuzz flags: which input to break, and how.
const (
	fuzzCutMask      = 3   // cut data from q (0), k (1), v (2); 3: none
	fuzzMismatchV    = 4   // v gets Nk+1 rows
	fuzzNilQ         = 8   // q is nil
	fuzzNilKData     = 16  // k has no data
	fuzzTrace        = 32  // trace the last row
	fuzzTraceOutside = 64  // ... or a row past the end
	fuzzNegScale     = 128 // keep a negative scale (refused); else its magnitude is used
	fuzzRawScale     = 256 // the scale as drawn, over the whole float64 range; else folded into [0, 16)
)

// fuzzLayout returns the strides of layout l (0..5) for shape s. Layout 4
// has a negative stride, which the library must refuse.
func fuzzLayout(l int, s flashattn.Shape) flashattn.Strides {
	switch l {
	case 1: // head-major (BHSD)
		return flashattn.Strides{s.H * s.N * s.D, s.D, s.N * s.D, 1}
	case 2: // every other element along D
		return flashattn.Strides{2 * s.N * s.H * s.D, 2 * s.H * s.D, 2 * s.D, 2}
	case 3: // batch broadcast: every batch reads the same data
		return flashattn.Strides{0, s.H * s.D, s.D, 1}
	case 4:
		return flashattn.Strides{s.N * s.H * s.D, -s.H * s.D, s.D, 1}
	case 5: // rows padded by 3 elements
		return flashattn.Strides{s.N * (s.H*s.D + 3), s.H*s.D + 3, s.D, 1}
	}
	return s.ContiguousStrides()
}

// fuzzTensor builds a tensor of any (possibly invalid) shape without
// validating it; cut removes elements from the end of its data. It reports
// whether the tensor is valid as built.
func fuzzTensor(r *rand.Rand, s flashattn.Shape, layout, cut int) (*flashattn.Tensor, bool) {
	st := fuzzLayout(layout, s)
	n, valid := 8, false
	if s.B >= 1 && s.N >= 1 && s.H >= 1 && s.D >= 1 {
		n = 1
		for i, dim := range [4]int{s.B, s.N, s.H, s.D} {
			n += (dim - 1) * max(st[i], 0)
		}
		valid = layout != 4 && cut == 0
	}
	data := make([]float32, max(n-cut, 0))
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	return &flashattn.Tensor{Shape: s, Strides: st, Data: data}, valid
}

func typedError(err error) bool {
	var (
		se *flashattn.ShapeError
		de *flashattn.DataError
		oe *flashattn.OptionError
		ue *flashattn.UnsupportedError
	)
	return errors.As(err, &se) || errors.As(err, &de) || errors.As(err, &oe) || errors.As(err, &ue) || errors.Is(err, flashattn.ErrNoGPU)
}

// FuzzForward drives Forward (and, when it succeeds, Backward) across the
// API boundary with random shapes (0 and negative included), strides, short
// or missing data and options (NaN and infinite scales, causal, GQA, tiles,
// workers, traces). Every call must either succeed with a correct result or
// return one of the library's typed errors; which of the two is decided
// here, independently of the library. It must never panic. Correct means
// attntest's structural checks (every element written, exact masked rows)
// and every element within its float32 error bound of the float64 truth:
// the 2x-baseline rule of the suite is statistical and fails correct
// results by bad luck on small sharp problems, which fuzzing finds (see
// attntest/bound.go).
func FuzzForward(f *testing.F) {
	f.Add(uint64(1), int8(1), int8(17), int8(17), int8(4), int8(2), int8(16), uint8(0), int8(0), 0.0, true, uint8(1), int64(0), int64(0), int64(0), uint16(3))
	f.Add(uint64(2), int8(2), int8(33), int8(9), int8(8), int8(1), int8(7), uint8(1), int8(0), 0.5, true, uint8(0), int64(4), int64(3), int64(2), uint16(3|fuzzTrace))
	f.Add(uint64(3), int8(3), int8(5), int8(40), int8(2), int8(2), int8(24), uint8(2), int8(0), -2.0, false, uint8(1), int64(1), int64(1), int64(1), uint16(3))
	f.Add(uint64(4), int8(2), int8(12), int8(12), int8(3), int8(1), int8(8), uint8(3), int8(0), 0.0, true, uint8(1), int64(5), int64(7), int64(0), uint16(3|fuzzTrace))
	f.Add(uint64(5), int8(1), int8(6), int8(6), int8(2), int8(1), int8(8), uint8(5), int8(0), 0.0, false, uint8(0), int64(0), int64(0), int64(0), uint16(3))
	f.Add(uint64(6), int8(1), int8(6), int8(6), int8(3), int8(2), int8(8), uint8(0), int8(0), 0.0, false, uint8(1), int64(0), int64(0), int64(0), uint16(3))          // Hq % Hkv != 0
	f.Add(uint64(7), int8(0), int8(-3), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(0), 0.0, false, uint8(1), int64(0), int64(0), int64(0), uint16(3))         // zero and negative dims
	f.Add(uint64(8), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(1), 0.0, false, uint8(1), int64(0), int64(0), int64(0), uint16(1))          // short k
	f.Add(uint64(9), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(4), int8(0), 0.0, false, uint8(1), int64(0), int64(0), int64(0), uint16(3))          // negative stride
	f.Add(uint64(10), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(0), math.NaN(), true, uint8(1), int64(0), int64(0), int64(0), uint16(3))   // NaN scale
	f.Add(uint64(11), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(0), math.Inf(-1), true, uint8(0), int64(0), int64(0), int64(0), uint16(3)) // -Inf scale
	f.Add(uint64(12), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(0), 0.0, true, uint8(2), int64(-1), int64(0), int64(-1), uint16(3|fuzzMismatchV|fuzzNilQ|fuzzNilKData|fuzzTrace|fuzzTraceOutside))
	f.Add(uint64(14), int8(1), int8(6), int8(6), int8(1), int8(1), int8(8), uint8(0), int8(0), -0.5, true, uint8(1), int64(0), int64(0), int64(0), uint16(3|fuzzNegScale)) // negative scale
	// Found by fuzzing: correct results far beyond 2x the baseline (2.7x,
	// 12x, 2.3x) on sharp softmaxes; they must pass the float32 bounds.
	f.Add(uint64(13), int8(1), int8(20), int8(6), int8(8), int8(1), int8(39), uint8(1), int8(0), 11.0, false, uint8(1), int64(0), int64(0), int64(0), uint16(3))
	f.Add(uint64(8), int8(1), int8(6), int8(60), int8(1), int8(1), int8(36), uint8('O'), int8(-60), -59.0, true, uint8(1), int64(0), int64(45), int64(54), uint16(1))
	f.Add(uint64(0), int8(1), int8(17), int8(17), int8(4), int8(2), int8(7), uint8(0), int8(0), -95.0, true, uint8(1), int64(0), int64(40), int64(0), uint16(0))
	f.Add(uint64(105), int8(10), int8(109), int8(6), int8(40), int8(2), int8(10), uint8(' '), int8(-8), 0.0, true, uint8(0x15), int64(0), int64(0), int64(0), uint16(0))
	f.Add(uint64(20), int8(1), int8(8), int8(8), int8(2), int8(1), int8(8), uint8(0), int8(0), 0.0, false, uint8(1), int64(math.MaxInt64), int64(math.MaxInt64-1), int64(0), uint16(3)) // blocks near MaxInt
	f.Add(uint64(21), int8(2), int8(9), int8(30), int8(2), int8(2), int8(8), uint8(0), int8(0), 0.0, true, uint8(1), int64(1), int64(1<<40), int64(flashattn.MaxWorkers), uint16(3))    // MaxWorkers
	f.Add(uint64(22), int8(1), int8(9), int8(9), int8(1), int8(1), int8(8), uint8(0), int8(0), 0.0, false, uint8(1), int64(0), int64(0), int64(math.MaxInt64), uint16(3))               // Workers beyond MaxWorkers
	f.Add(uint64(23), int8(1), int8(9), int8(7), int8(2), int8(1), int8(8), uint8(0), int8(0), 3.4e38, false, uint8(0), int64(0), int64(0), int64(0), uint16(3|fuzzRawScale))           // scores beyond float32
	f.Add(uint64(24), int8(1), int8(9), int8(7), int8(2), int8(1), int8(8), uint8(0), int8(0), 1e30, true, uint8(1), int64(2), int64(3), int64(0), uint16(3|fuzzRawScale))              // huge but finite scores
	f.Add(uint64(25), int8(1), int8(9), int8(7), int8(2), int8(1), int8(8), uint8(0), int8(0), 1e39, false, uint8(1), int64(0), int64(0), int64(0), uint16(3|fuzzRawScale))             // beyond float32: refused
	f.Add(uint64(26), int8(1), int8(9), int8(7), int8(2), int8(1), int8(8), uint8(0), int8(0), 5e-324, false, uint8(0), int64(0), int64(0), int64(0), uint16(3|fuzzRawScale))           // 0 in float32
	f.Fuzz(func(t *testing.T, seed uint64, b, nq, nk, hq, hkv, dd int8, layout uint8, cut int8, scale float64, causal bool, backend uint8, bq, bk, workers int64, flags uint16) {
		// Bounded sizes (the reference is O(N^2)); negative values stay possible.
		d := flashattn.Dims{B: int(b) % 4, Nq: int(nq) % 70, Nk: int(nk) % 70, Hq: int(hq) % 9, Hkv: int(hkv) % 9, D: int(dd) % 41}
		// A finite scale is folded into [0, 16): scores of standard deviation
		// up to 16*sqrt(D), a softmax as sharp as float32 allows. NaN and Inf
		// stay, and so does a negative scale under fuzzNegScale: all refused.
		if !math.IsNaN(scale) && !math.IsInf(scale, 0) && flags&fuzzRawScale == 0 {
			scale = math.Mod(scale, 16)
			if flags&fuzzNegScale == 0 {
				scale = math.Abs(scale)
			}
		}
		r := rand.New(rand.NewPCG(seed, 1))
		l := int(layout % 6)
		cutAt, cutBy := int(flags&fuzzCutMask), max(int(cut), 0)
		cutOf := func(i int) int {
			if i == cutAt {
				return cutBy
			}
			return 0
		}
		q, qOK := fuzzTensor(r, d.QShape(), l, cutOf(0))
		k, kOK := fuzzTensor(r, d.KVShape(), l, cutOf(1))
		vs := d.KVShape()
		if flags&fuzzMismatchV != 0 {
			vs.N++
		}
		v, vOK := fuzzTensor(r, vs, l, cutOf(2))
		if flags&fuzzNilQ != 0 {
			q, qOK = nil, false
		}
		if flags&fuzzNilKData != 0 {
			k.Data, kOK = nil, false
		}
		o := &flashattn.Options{Causal: causal, Scale: scale, BlockQ: int(bq), BlockK: int(bk), Workers: int(workers)}
		o.Backend = []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash, flashattn.Backend(9)}[backend%3]
		traceOK := true
		if flags&fuzzTrace != 0 {
			o.Trace = &flashattn.Trace{Row: d.Nq - 1}
			if flags&fuzzTraceOutside != 0 {
				o.Trace.Row, traceOK = d.Nq, false
			}
			traceOK = traceOK && o.Backend != flashattn.CPUNaive // only CPUFlash traces
		}

		valid := qOK && kOK && vOK && flags&fuzzMismatchV == 0 && d.Hkv >= 1 && d.Hq%d.Hkv == 0 &&
			!math.IsNaN(scale) && !math.IsInf(scale, 0) && scale >= 0 && scale <= math.MaxFloat32 && o.Backend != flashattn.Backend(9) &&
			bq >= 0 && bk >= 0 && workers >= 0 && workers <= flashattn.MaxWorkers && traceOK
		res, err := flashattn.Forward(q, k, v, o)
		if !valid {
			if err == nil || !typedError(err) {
				t.Fatalf("invalid input %+v layout %d flags %#x scale %v: got error %v, want a typed error", d, l, flags, scale, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid input %+v layout %d options %+v: %v", d, l, *o, err)
		}
		effScale := scale
		if scale == 0 {
			effScale = 1 / math.Sqrt(float64(d.D))
		}
		dO := flashattn.Random(d.QShape(), seed+1)
		truth := attntest.Reference(q, k, v, dO, causal, effScale)
		// Rows whose float32 scores scale*q.k may overflow must be NaN
		// (output and LSE) if they are not right: never LSE -Inf, never a
		// finite wrong answer. Those rows are checked here and replaced by
		// the truth for the bound check of the others.
		chk, nanRows, huge := overflowRows(t, d, q, k, causal, effScale, res, truth)
		if !attntest.CheckForwardBound(t, truth, chk) {
			t.Fatalf("forward of %+v layout %d options %+v is wrong", d, l, *o)
		}
		if nanRows > 0 {
			var de *flashattn.DataError
			if _, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o); !errors.As(err, &de) || de.Arg != "lse" {
				t.Fatalf("Backward with NaN LSE rows: %v, want a *DataError for lse", err)
			}
			return
		}
		if huge { // gradients of scale*dS*K beyond float32 are not this check's business
			if _, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o); err != nil {
				t.Fatalf("Backward at scale %g: %v", effScale, err)
			}
			return
		}
		if tr := o.Trace; tr != nil && o.Backend == flashattn.CPUFlash && len(tr.Steps) != tr.Tr*tr.Tc {
			t.Fatalf("trace has %d steps for a %dx%d grid", len(tr.Steps), tr.Tr, tr.Tc)
		}
		g, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatalf("Backward of valid input %+v: %v", d, err)
		}
		if !attntest.CheckBackwardBound(t, truth, g) {
			t.Fatalf("backward of %+v layout %d options %+v is wrong", d, l, *o)
		}
	})
}

// overflowRows checks every row of res that is NaN: its float32 scores
// scale*q.k must be able to overflow (float32(scale) * sum_x |q_ix k_jx|
// near MaxFloat32 for a key it sees), and its output must be NaN too. It
// returns a copy of res for the bound check of the other rows, in which
// those rows are marked, in res's copy and in truth, as rows that see no key
// (output 0, LSE -Inf: their true LSE may lie beyond float32), their number, and whether any score is
// beyond 1e30 (where the gradients may overflow float32).
func overflowRows(t *testing.T, d flashattn.Dims, q, k *flashattn.Tensor, causal bool, scale float64, res *flashattn.Result, truth *attntest.Ref) (chk *flashattn.Result, nanRows int, huge bool) {
	t.Helper()
	c := *res
	c.Out, c.LSE = res.Out.Clone(), append([]float32(nil), res.LSE...)
	sc := math.Abs(float64(float32(scale)))
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.Hq; h++ {
			for i := 0; i < d.Nq; i++ {
				a := 0.0
				for j := 0; j < d.Nk; j++ {
					if causal && j > i+d.Nk-d.Nq {
						continue
					}
					s := 0.0
					for x := 0; x < d.D; x++ {
						s += math.Abs(float64(q.At(b, i, h, x)) * float64(k.At(b, j, d.KVHead(h), x)))
					}
					a = max(a, s*sc)
				}
				huge = huge || a > 1e30
				row := d.LSEIndex(b, h, i)
				if !math.IsNaN(float64(res.LSE[row])) {
					continue
				}
				if a < math.MaxFloat32/2 {
					t.Fatalf("row %d (b %d, h %d) is NaN, but its largest score is %g", i, b, h, a)
				}
				for x := 0; x < d.D; x++ {
					if o := res.Out.At(b, i, h, x); !math.IsNaN(float64(o)) {
						t.Fatalf("row %d (b %d, h %d): LSE NaN, output %v", i, b, h, o)
					}
					c.Out.Set(b, i, h, x, 0)
					truth.Out[((b*d.Nq+i)*d.Hq+h)*d.D+x] = 0
				}
				truth.Masked[row], truth.LSE[row], c.LSE[row] = true, math.Inf(-1), float32(math.Inf(-1))
				nanRows++
			}
		}
	}
	return &c, nanRows, huge
}
