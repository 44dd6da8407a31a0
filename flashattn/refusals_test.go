package flashattn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRawOverlapRefused: CheckRawForward and CheckRawBackward refuse an
// output that shares a byte with any other operand (the doc: outputs must
// not overlap inputs or each other) and an operand whose bytes wrap past
// 2^64, with a *DataError naming it; interleaved views that share no byte
// (packed QKV, packed dQKV) and inputs that overlap each other still pass.
func TestRawOverlapRefused(t *testing.T) {
	d := rawDims
	qs, kvs := d.QShape(), d.KVShape()
	dense := func(s Shape, ptr uint64) RawTensor {
		return RawTensor{Ptr: ptr, Strides: s.ContiguousStrides(), Bytes: 2 * s.Numel()}
	}
	data := func(arg string) func(error) bool {
		return func(err error) bool { var e *DataError; return errors.As(err, &e) && e.Arg == arg }
	}
	wrapAt := func(need int) uint64 { return (math.MaxUint64 - uint64(need) + 1 + 64) &^ 15 } // need bytes from here pass 2^64
	for _, c := range []struct {
		name string
		edit func(a *RawForwardArgs)
		want func(error) bool // nil: accepted
	}{
		{"out == k", func(a *RawForwardArgs) { a.Out = dense(qs, a.K.Ptr) }, data("out")},
		{"out == q (dense q)", func(a *RawForwardArgs) { a.Q = dense(qs, 1<<40); a.Out = dense(qs, 1<<40) }, data("out")},
		{"lse inside q", func(a *RawForwardArgs) { a.LSE.Ptr = a.Q.Ptr + 4096 }, data("lse")},
		{"lse inside out", func(a *RawForwardArgs) { a.LSE.Ptr = a.Out.Ptr + 256 }, data("lse")},
		{"out's last row on v's first", func(a *RawForwardArgs) {
			a.V = dense(kvs, 1<<40)
			a.Out = dense(qs, 1<<40-uint64(a.Out.Bytes)+128)
		}, data("out")},
		{"out right after v", func(a *RawForwardArgs) {
			a.V = dense(kvs, 1<<40)
			a.Out = dense(qs, 1<<40+uint64(a.V.Bytes))
		}, nil},
		{"lse right before out", func(a *RawForwardArgs) { a.LSE.Ptr = a.Out.Ptr - uint64(a.LSE.Bytes) }, nil},
		{"q == k == v (inputs may overlap)", func(a *RawForwardArgs) {
			a.Q, a.K, a.V = dense(qs, 1<<40), dense(kvs, 1<<40), dense(kvs, 1<<40)
		}, nil},
		{"q wraps past 2^64", func(a *RawForwardArgs) { a.Q.Ptr = wrapAt(a.Q.Bytes) }, data("q")},
		{"out wraps past 2^64", func(a *RawForwardArgs) { a.Out.Ptr = wrapAt(a.Out.Bytes) }, data("out")},
		{"lse wraps past 2^64", func(a *RawForwardArgs) { a.LSE.Ptr = math.MaxUint64 - 3 }, data("lse")},
		{"q wraps, Bytes 0", func(a *RawForwardArgs) { a.Q.Ptr, a.Q.Bytes = wrapAt(a.Q.Bytes), 0 }, data("q")},
		{"out == q, both ending at 2^64", func(a *RawForwardArgs) {
			end := math.MaxUint64 - uint64(2*qs.Numel()) + 1
			a.Q, a.Out = dense(qs, end), dense(qs, end)
		}, data("out")},
	} {
		a := rawFwdArgs()
		c.edit(&a)
		err := CheckRawForward(d, FP16, &a)
		if c.want == nil && err != nil || c.want != nil && !c.want(err) {
			t.Errorf("forward, %s: %v", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		edit func(a *RawBackwardArgs)
		want func(error) bool
	}{
		{"dK == dV", func(a *RawBackwardArgs) { a.DV = a.DK }, data("dV")},
		{"dQ == q", func(a *RawBackwardArgs) { a.DQ = a.Q }, data("dQ")},
		{"Di == lse", func(a *RawBackwardArgs) { a.Di = a.LSE }, data("Di")},
		{"dV == dOut", func(a *RawBackwardArgs) { a.DV = dense(kvs, a.DOut.Ptr) }, data("dV")},
		{"dK == k (packed)", func(a *RawBackwardArgs) { a.DK = a.K }, data("dK")},
		{"Di inside dQ", func(a *RawBackwardArgs) { a.Di.Ptr = a.DQ.Ptr + 1024 }, data("Di")},
		{"dQ over out's second half", func(a *RawBackwardArgs) { a.DQ = dense(qs, a.Out.Ptr+uint64(a.Out.Bytes/2)) }, data("dQ")},
		{"dV wraps past 2^64", func(a *RawBackwardArgs) { a.DV.Ptr = wrapAt(a.DV.Bytes) }, data("dV")},
		{"Di wraps past 2^64", func(a *RawBackwardArgs) { a.Di.Ptr = math.MaxUint64 - 3 }, data("Di")},
		{"out == dOut (inputs may overlap)", func(a *RawBackwardArgs) { a.DOut = a.Out }, nil},
	} {
		a := rawBwdArgs()
		c.edit(&a)
		err := CheckRawBackward(d, FP16, &a)
		if c.want == nil && err != nil || c.want != nil && !c.want(err) {
			t.Errorf("backward, %s: %v", c.name, err)
		}
	}
}

// TestLadderLastRungKernels: the last rung, the shipped kernel, lists the
// shipped forward kernels of both kernel paths, as its doc says.
func TestLadderLastRungKernels(t *testing.T) {
	steps := Ladder()
	last := steps[len(steps)-1]
	want := slices.Concat(KernelTable(75), KernelTable(80))
	if len(want) == 0 || !slices.Equal(last.Kernels, want) {
		t.Errorf("last rung lists %d kernels, want KernelTable(75) and KernelTable(80): %d", len(last.Kernels), len(want))
	}
	for _, s := range steps[:len(steps)-1] {
		if len(s.Kernels) == 0 {
			t.Errorf("rung %d lists no kernels", s.Rung)
		}
	}
}

// TestTraceSharedByConcurrentCalls: a Trace that one call is filling is
// refused by another with an *OptionError instead of mixing both calls'
// steps; once the first call returns the Trace serves again.
func TestTraceSharedByConcurrentCalls(t *testing.T) {
	d := Dims{B: 1, Nq: 4096, Nk: 4096, Hq: 1, Hkv: 1, D: 64}
	q, k, v := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3)
	tr := &Trace{}
	o := &Options{Backend: CPUFlash, Workers: 1, Trace: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() { _, err := ForwardContext(ctx, q, k, v, o); first <- err }()
	time.Sleep(200 * time.Millisecond) // the first call runs (seconds of work, one goroutine)
	small := Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 8}
	sq, sk, sv := Random(small.QShape(), 1), Random(small.KVShape(), 2), Random(small.KVShape(), 3)
	_, err := Forward(sq, sk, sv, o)
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Option != "Trace" {
		t.Errorf("second call on a Trace in use: %v, want an *OptionError for Trace", err)
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first call: %v", err)
	}
	if _, err := Forward(sq, sk, sv, o); err != nil {
		t.Errorf("the Trace after the first call returned: %v", err)
	}
	if tr.Tr != 1 || tr.Tc != 1 || len(tr.Steps) != 1 {
		t.Errorf("trace of the last call: Tr %d Tc %d, %d steps", tr.Tr, tr.Tc, len(tr.Steps))
	}
}

// TestBackwardIgnoresTrace: Backward records no trace and ignores
// Options.Trace alike on every backend, so one Options serves a Forward and
// its Backward: the gradients are those of a call without it, and the trace is left as
// it was.
func TestBackwardIgnoresTrace(t *testing.T) {
	d := Dims{B: 1, Nq: 40, Nk: 30, Hq: 2, Hkv: 1, D: 8}
	q, k, v, dO := Random(d.QShape(), 1), Random(d.KVShape(), 2), Random(d.KVShape(), 3), Random(d.QShape(), 4)
	for _, be := range []Backend{Auto, CPUFlash, CPUNaive} {
		f, err := Forward(q, k, v, &Options{Backend: CPUFlash, Causal: true})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Backward(q, k, v, f.Out, dO, f.LSE, &Options{Backend: be, Causal: true})
		if err != nil {
			t.Fatal(err)
		}
		tr := &Trace{Row: 3}
		traced, err := Backward(q, k, v, f.Out, dO, f.LSE, &Options{Backend: be, Causal: true, Trace: tr})
		if err != nil {
			t.Errorf("Backward on %v with a Trace: %v, want it ignored", be, err)
			continue
		}
		if traced.Backend != plain.Backend || !slices.Equal(traced.DQ.Data, plain.DQ.Data) || !slices.Equal(traced.DK.Data, plain.DK.Data) || !slices.Equal(traced.DV.Data, plain.DV.Data) {
			t.Errorf("Backward on %v: a Trace changed the call (backend %v, want %v)", be, traced.Backend, plain.Backend)
		}
		if tr.Steps != nil || tr.RowSteps != nil || tr.Tr != 0 {
			t.Errorf("Backward on %v wrote the trace: %+v", be, tr)
		}
	}
}

// TestVarlenBatchNamesQ: varlen tensors pack the sequences along N, so
// each must have B = 1; a q (or k, v) with B = 2 is named itself, not
// reported as k disagreeing with it.
func TestVarlenBatchNamesQ(t *testing.T) {
	d := Dims{B: 1, Nq: 8, Nk: 8, Hq: 1, Hkv: 1, D: 8}
	vl := Varlen{CuSeqlensQ: []int{0, 8}, CuSeqlensK: []int{0, 8}}
	one, two := d.QShape(), d.QShape()
	two.B = 2
	for _, c := range []struct {
		arg     string
		q, k, v Shape
	}{{"q", two, one, one}, {"k", one, two, one}, {"v", one, one, two}} {
		_, err := ForwardVarlen(Random(c.q, 1), Random(c.k, 2), Random(c.v, 3), vl, &Options{Backend: CPUFlash})
		var se *ShapeError
		if !errors.As(err, &se) || se.Arg != c.arg || se.Dim != "B" || se.Got != 2 || !strings.Contains(se.Want, "== 1") || !strings.Contains(err.Error(), "varlen") {
			t.Errorf("%s with B = 2: %v, want a *ShapeError for %s: B is 2, want == 1 (varlen)", c.arg, err, c.arg)
		}
	}
}

// TestOverlapAgreesWithEnumeration: overlap answers as listing every byte
// of both operands does, on small random shapes, strides and addresses
// (dense, packed, BHSD, broadcast and arbitrary multiples of 8).
func TestOverlapAgreesWithEnumeration(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(o *rawOp) map[uint64]bool {
		m := map[uint64]bool{}
		var walk func(k int, at uint64)
		walk = func(k int, at uint64) {
			if k == o.ndim {
				m[at] = true
				return
			}
			for i := int64(0); i < o.dims[k].n; i++ {
				walk(k+1, at+uint64(i*o.dims[k].step))
			}
		}
		walk(0, o.ptr)
		return m
	}
	randTensor := func(arg string) rawOp {
		s := Shape{B: 1 + r.IntN(2), N: 1 + r.IntN(4), H: 1 + r.IntN(3), D: 8 * (1 + r.IntN(2))}
		var st Strides
		switch r.IntN(3) {
		case 0:
			st = s.ContiguousStrides()
		case 1: // packed: heads of three tensors interleaved
			w := 3 * s.H * s.D
			st = Strides{s.N * w, w, s.D, 1}
		default:
			st = Strides{8 * r.IntN(12), 8 * r.IntN(12), 8 * r.IntN(6), 1}
		}
		ptr := uint64(1<<20 + 16*r.IntN(64))
		o, err := tensorOp(arg, &RawTensor{Ptr: ptr, Strides: st}, s, FP16, false)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for i := range 20000 {
		a := randTensor("a")
		var b rawOp
		if i%4 == 0 {
			b = bufferOp("b", &RawBuffer{Ptr: uint64(1<<20 + 4*r.IntN(256))}, 4*(1+r.IntN(32)), true)
		} else {
			b = randTensor("b")
		}
		ba, bb := bytesOf(&a), bytesOf(&b)
		want := false
		for x := range ba {
			if bb[x] {
				want = true
				break
			}
		}
		if got := overlap(&a, &b); got != want {
			t.Fatalf("case %d: overlap(%+v, %+v) = %t, enumeration says %t", i, a, b, got, want)
		}
	}
}
