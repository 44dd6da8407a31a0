package flashattn

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// cpuPlans makes the raw plans of dims from their plans alone (no
// device): what Enqueue checks and fills before it talks to the driver.
func cpuPlans(t testing.TB, dims Dims, path int, causal bool) (*RawForward, *RawBackward) {
	t.Helper()
	p, err := (&Options{Causal: causal}).resolve(dims)
	if err != nil {
		t.Fatal(err)
	}
	c := planDevice{name: "no device", path: path, smemOptin: kernels.BaseSmemBytes, maxGridY: 65535, ctas: 132}
	r := rawPlan{p: p, dt: FP16}
	var out [2][]*loadedKernel
	var pls [2]plan
	for i, op := range []planOp{opRawForward, opRawBackward} {
		if pls[i], err = planOf(c, planRequest{op: op, p: p, dt: FP16}); err != nil {
			t.Fatalf("path %d D %d: %v", path, dims.D, err)
		}
		for _, v := range pls[i].kernels {
			out[i] = append(out[i], &loadedKernel{v: v, info: kernelInfo(v)})
		}
	}
	return newRawForward(r, pls[0], out[0]), newRawBackward(r, pls[1], out[1])
}

// packedQKV lays q, k, v out as one (B, N, Hq+2*Hkv, D) buffer at base, as a
// fused projection writes them, each with the exact bytes it may touch.
func packedQKV(d Dims, base uint64) (q, k, v RawTensor) {
	w := (d.Hq + 2*d.Hkv) * d.D
	st := Strides{d.Nq * w, w, d.D, 1}
	at := func(off int, s Shape) RawTensor {
		return RawTensor{Ptr: base + uint64(2*off), Strides: st, Bytes: FP16.Size() * s.Span(st)}
	}
	return at(0, d.QShape()), at(d.Hq*d.D, d.KVShape()), at((d.Hq+d.Hkv)*d.D, d.KVShape())
}

// bhsd is a BHSD operand at ptr with the exact bytes it may touch.
func bhsd(s Shape, ptr uint64) RawTensor {
	st := Strides{s.H * s.N * s.D, s.D, s.N * s.D, 1}
	return RawTensor{Ptr: ptr, Strides: st, Bytes: FP16.Size() * s.Span(st)}
}

var rawDims = Dims{B: 2, Nq: 97, Nk: 97, Hq: 4, Hkv: 2, D: 64}

func rawFwdArgs() RawForwardArgs {
	q, k, v := packedQKV(rawDims, 1<<32)
	return RawForwardArgs{Q: q, K: k, V: v, Out: bhsd(rawDims.QShape(), 1<<33),
		LSE: RawBuffer{Ptr: 1 << 34, Bytes: rawDims.LSEBytes()}}
}

func rawBwdArgs() RawBackwardArgs {
	q, k, v := packedQKV(rawDims, 1<<32)
	dq, dk, dv := packedQKV(rawDims, 1<<35)
	return RawBackwardArgs{Q: q, K: k, V: v,
		Out: bhsd(rawDims.QShape(), 1<<33), DOut: bhsd(rawDims.QShape(), 1<<36),
		LSE: RawBuffer{Ptr: 1 << 34, Bytes: rawDims.LSEBytes()},
		DQ:  dq, DK: dk, DV: dv,
		Di: RawBuffer{Ptr: 1 << 37, Bytes: rawDims.DiBytes()}}
}

// The checks and the parameter filling of a raw call allocate nothing, and
// the parameter block gets exactly the caller's addresses and strides.
func TestRawFillAllocs(t *testing.T) {
	f, b := cpuPlans(t, rawDims, 80, true)
	fa, ba := rawFwdArgs(), rawBwdArgs()
	var ops [10]rawOp
	if n := testing.AllocsPerRun(100, func() {
		if err := rawOps(ops[:len(rawFwdOperands)], rawFwdOperands, fa.operands(), f.p.Dims, f.dt); err != nil {
			t.Fatal(err)
		}
		f.fields.fill(fa.operands())
	}); n != 0 {
		t.Errorf("forward: %v allocations per call, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := rawOps(ops[:], rawBwdOperands, ba.operands(), b.p.Dims, b.dt); err != nil {
			t.Fatal(err)
		}
		b.fields.fill(ba.operands())
	}); n != 0 {
		t.Errorf("backward: %v allocations per call, want 0", n)
	}
	p := f.params
	if p.Q != fa.Q.Ptr || p.K != fa.K.Ptr || p.V != fa.V.Ptr || p.O != fa.Out.Ptr || p.LSE != fa.LSE.Ptr {
		t.Errorf("forward pointers %#x %#x %#x %#x %#x, want those of %+v", p.Q, p.K, p.V, p.O, p.LSE, fa)
	}
	if got := [3]int64{p.KBatchStride, p.KRowStride, p.KHeadStride}; got != [3]int64{int64(fa.K.Strides[0]), int64(fa.K.Strides[1]), int64(fa.K.Strides[2])} {
		t.Errorf("k strides %v, want %v", got, fa.K.Strides)
	}
	if got := [3]int64{p.OBatchStride, p.ORowStride, p.OHeadStride}; got != [3]int64{int64(fa.Out.Strides[0]), int64(fa.Out.Strides[1]), int64(fa.Out.Strides[2])} {
		t.Errorf("out strides %v, want %v", got, fa.Out.Strides)
	}
	d := rawDims
	if p.B != int32(d.B) || p.Nq != int32(d.Nq) || p.Nk != int32(d.Nk) || p.Hq != int32(d.Hq) || p.Hkv != int32(d.Hkv) || p.D != int32(d.D) {
		t.Errorf("sizes %d %d %d %d %d %d, want %+v", p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D, d)
	}
	if want := float32(1 / math.Sqrt(64)); p.Scale != want {
		t.Errorf("scale %v, want %v", p.Scale, want)
	}
	br := f.kern.info.Br
	if g := f.cfg.Grid; g != [3]uint32{uint32((d.Nq + br - 1) / br), uint32(d.B * d.Hq), 1} {
		t.Errorf("grid %v for Nq %d, Br %d, B*Hq %d", g, d.Nq, br, d.B*d.Hq)
	}
	bp := b.params
	if bp.DK != ba.DK.Ptr || bp.Di != ba.Di.Ptr || bp.DO != ba.DOut.Ptr || bp.DVRowStride != int64(ba.DV.Strides[1]) || bp.DOHeadStride != int64(ba.DOut.Strides[2]) {
		t.Errorf("backward block %+v does not hold %+v", *bp, ba)
	}
}

// Enqueue writes each operand's address and strides into that operand's
// own fields of the parameter block: the forward's (the Hopper plan's
// block too) and the backward's, every field checked by name.
func TestRawFillFields(t *testing.T) {
	f, b := cpuPlans(t, rawDims, 80, false)
	alt := f.kern.v
	hopper := newRawForward(f.rawPlan, plan{cfgs: []cuda.LaunchConfig{f.cfg}, alt: &alt}, []*loadedKernel{f.kern, f.kern}) // a plan with an sm_80 twin: its block is the Sm90FwdArgs'
	op := func(i int) RawTensor {
		return RawTensor{Ptr: uint64(1000 * (i + 1)), Strides: Strides{10*i + 1, 10*i + 2, 10*i + 3, 1}}
	}
	want := func(i int) [4]int64 {
		return [4]int64{int64(1000 * (i + 1)), int64(10*i + 1), int64(10*i + 2), int64(10*i + 3)}
	}
	fa := RawForwardArgs{Q: op(0), K: op(1), V: op(2), Out: op(3), LSE: RawBuffer{Ptr: 77}}
	for _, plan := range []*RawForward{f, hopper} {
		plan.fields.fill(fa.operands())
		p := plan.params
		got := [4][4]int64{{int64(p.Q), p.QBatchStride, p.QRowStride, p.QHeadStride}, {int64(p.K), p.KBatchStride, p.KRowStride, p.KHeadStride},
			{int64(p.V), p.VBatchStride, p.VRowStride, p.VHeadStride}, {int64(p.O), p.OBatchStride, p.ORowStride, p.OHeadStride}}
		for i, g := range got {
			if g != want(i) {
				t.Errorf("forward operand %d: address and strides %v, want %v", i, g, want(i))
			}
		}
		if p.LSE != 77 {
			t.Errorf("forward LSE %d, want 77", p.LSE)
		}
	}
	if hopper.params != &hopper.h.P {
		t.Fatal("the Hopper plan's parameter block is not its Sm90FwdArgs'")
	}
	ba := RawBackwardArgs{Q: op(0), K: op(1), V: op(2), Out: op(3), DOut: op(4), DQ: op(5), DK: op(6), DV: op(7),
		LSE: RawBuffer{Ptr: 77}, Di: RawBuffer{Ptr: 88}}
	b.fields.fill(ba.operands())
	p := b.params
	got := [8][4]int64{{int64(p.Q), p.QBatchStride, p.QRowStride, p.QHeadStride}, {int64(p.K), p.KBatchStride, p.KRowStride, p.KHeadStride},
		{int64(p.V), p.VBatchStride, p.VRowStride, p.VHeadStride}, {int64(p.O), p.OBatchStride, p.ORowStride, p.OHeadStride},
		{int64(p.DO), p.DOBatchStride, p.DORowStride, p.DOHeadStride}, {int64(p.DQ), p.DQBatchStride, p.DQRowStride, p.DQHeadStride},
		{int64(p.DK), p.DKBatchStride, p.DKRowStride, p.DKHeadStride}, {int64(p.DV), p.DVBatchStride, p.DVRowStride, p.DVHeadStride}}
	for i, g := range got {
		if g != want(i) {
			t.Errorf("backward operand %d: address and strides %v, want %v", i, g, want(i))
		}
	}
	if p.LSE != 77 || p.Di != 88 {
		t.Errorf("backward LSE %d, Di %d, want 77, 88", p.LSE, p.Di)
	}
}

// Every refusal a raw call can make without the driver, each typed and
// naming the operand.
func TestRawChecks(t *testing.T) {
	data := func(arg string) func(error) bool {
		return func(err error) bool { var e *DataError; return errors.As(err, &e) && e.Arg == arg }
	}
	unsupported := func(feature string) func(error) bool {
		return func(err error) bool { var e *UnsupportedError; return errors.As(err, &e) && e.Feature == feature }
	}
	for _, c := range []struct {
		name string
		edit func(a *RawForwardArgs)
		want func(error) bool
	}{
		{"packed QKV and BHSD out", func(a *RawForwardArgs) {}, nil},
		{"Bytes 0: asked of the driver later", func(a *RawForwardArgs) { a.Q.Bytes, a.LSE.Bytes = 0, 0 }, nil},
		{"nil q", func(a *RawForwardArgs) { a.Q.Ptr = 0 }, data("q")},
		{"nil lse", func(a *RawForwardArgs) { a.LSE.Ptr = 0 }, data("lse")},
		{"k not 16-byte aligned", func(a *RawForwardArgs) { a.K.Ptr += 8 }, data("k")},
		{"lse not 4-byte aligned", func(a *RawForwardArgs) { a.LSE.Ptr += 2 }, data("lse")},
		{"v one byte short", func(a *RawForwardArgs) { a.V.Bytes-- }, data("v")},
		{"lse one float short", func(a *RawForwardArgs) { a.LSE.Bytes -= 4 }, data("lse")},
		{"negative Bytes", func(a *RawForwardArgs) { a.Out.Bytes = -1 }, data("out")},
		{"D stride 2", func(a *RawForwardArgs) { a.Q.Strides[3] = 2 }, unsupported("q D stride")},
		{"row stride not a multiple of 8", func(a *RawForwardArgs) { a.K.Strides[1] += 4 }, unsupported("k N stride")},
		{"negative head stride", func(a *RawForwardArgs) { a.V.Strides[2] = -8 }, unsupported("v H stride")},
		{"broadcast k (batch stride 0) is an input: fine", func(a *RawForwardArgs) { a.K.Strides[0] = 0 }, nil},
		{"out heads aliased", func(a *RawForwardArgs) { a.Out.Strides[2] = 0 }, data("out")},
		{"out rows overlap", func(a *RawForwardArgs) { a.Out.Strides[1] = 8 }, data("out")},
		{"stride beyond 2^63 bytes", func(a *RawForwardArgs) { a.Q.Strides[0] = 1 << 62 }, data("q")},
	} {
		a := rawFwdArgs()
		c.edit(&a)
		err := CheckRawForward(rawDims, FP16, &a)
		if c.want == nil && err != nil || c.want != nil && !c.want(err) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if err := CheckRawForward(rawDims, FP16, nil); !data("args")(err) {
		t.Errorf("nil args: %v", err)
	}
	fa := rawFwdArgs()
	var se *ShapeError
	if err := CheckRawForward(Dims{B: 2, Nq: 97, Nk: 97, Hq: 3, Hkv: 2, D: 64}, FP16, &fa); !errors.As(err, &se) {
		t.Errorf("Hq not a multiple of Hkv: %v, want a *ShapeError", err)
	}
	var oe *OptionError
	if err := CheckRawForward(rawDims, 0, &fa); !errors.As(err, &oe) {
		t.Errorf("DType 0: %v, want an *OptionError", err)
	}
	a := rawBwdArgs()
	if err := CheckRawBackward(rawDims, FP16, &a); err != nil {
		t.Errorf("backward, packed dQKV: %v", err)
	}
	a.Di.Bytes--
	if err := CheckRawBackward(rawDims, FP16, &a); !data("Di")(err) {
		t.Errorf("backward, Di one byte short: %v", err)
	}
	a = rawBwdArgs()
	a.DV.Strides[1] = 0
	if err := CheckRawBackward(rawDims, FP16, &a); !data("dV")(err) {
		t.Errorf("backward, dV rows aliased: %v", err)
	}
}

// TestRawOfFreed: nil and freed tensors and results give address 0, which
// the checks refuse (TestGPURawExample checks live ones on a GPU).
func TestRawOfFreed(t *testing.T) {
	var nilT *DeviceTensor
	var nilR *DeviceResult
	freed := &DeviceTensor{shape: rawDims.QShape(), dtype: FP16, freed: true}
	if nilT.Ptr() != 0 || nilT.Raw() != (RawTensor{}) || nilR.RawLSE() != (RawBuffer{}) || freed.Ptr() != 0 {
		t.Fatalf("nil or freed: Ptr %#x, Raw %+v, RawLSE %+v, freed Ptr %#x", nilT.Ptr(), nilT.Raw(), nilR.RawLSE(), freed.Ptr())
	}
	a := rawFwdArgs()
	a.Out = freed.Raw()
	if a.Out.Bytes != FP16.Size()*rawDims.QShape().Numel() || a.Out.Strides != rawDims.QShape().ContiguousStrides() {
		t.Errorf("Raw of a dense %v: %+v", rawDims.QShape(), a.Out)
	}
	var de *DataError
	if err := CheckRawForward(rawDims, FP16, &a); !errors.As(err, &de) || de.Arg != "out" {
		t.Errorf("freed out: %v, want a *DataError for out", err)
	}
}

func TestCheckDType(t *testing.T) {
	for _, c := range []struct {
		dt   DType
		path int
		ok   bool
	}{{FP16, 75, true}, {FP16, 80, true}, {BF16, 80, true}, {BF16, 90, true}, {BF16, 75, false}, {0, 80, false}, {7, 80, false}} {
		err := checkDType(c.dt, c.path)
		var ue *UnsupportedError
		var oe *OptionError
		switch {
		case c.ok && err != nil, !c.ok && err == nil:
			t.Errorf("%v on path %d: %v", c.dt, c.path, err)
		case !c.ok && c.dt == BF16 && !errors.As(err, &ue):
			t.Errorf("bf16 on path %d: %v, want an *UnsupportedError", c.path, err)
		case !c.ok && c.dt != BF16 && !errors.As(err, &oe):
			t.Errorf("%v: %v, want an *OptionError", c.dt, err)
		}
	}
}

func TestShapeSpanAndInjective(t *testing.T) {
	s := Shape{B: 2, N: 3, H: 4, D: 8}
	if got := s.Span(s.ContiguousStrides()); got != s.Numel() {
		t.Errorf("dense span %d, want %d", got, s.Numel())
	}
	st := Strides{3 * 12 * 8, 12 * 8, 8, 1} // packed QKV view
	if got, want := s.Span(st), 1*3*12*8+2*12*8+3*8+8; got != want {
		t.Errorf("packed span %d, want %d", got, want)
	}
	big := Shape{B: 4, N: 1, H: 1, D: 8}
	for _, st := range []Strides{{1 << 62, 0, 0, 1}, {math.MaxInt, 0, 0, 1}} { // beyond int; beyond uint64
		if got := big.Span(st); got != math.MaxInt {
			t.Errorf("span with strides %v: %d, want MaxInt", st, got)
		}
	}
	for _, c := range []struct {
		st Strides
		ok bool
	}{
		{s.ContiguousStrides(), true}, {st, true}, {Strides{96, 8, 24, 1}, true}, // BHSD
		{Strides{96, 0, 8, 1}, false}, {Strides{96, 8, 8, 1}, false}, {Strides{96, 32, 4, 1}, false},
	} {
		if got := injective(s, c.st); got != c.ok {
			t.Errorf("injective(%v) = %v, want %v", c.st, got, c.ok)
		}
	}
	if !injective(Shape{B: 1, N: 5, H: 1, D: 8}, Strides{0, 8, 0, 1}) {
		t.Error("extent-1 dimensions with stride 0 are no overlap")
	}
}

// BenchmarkGPURawForwardOverhead reports the host cost of one raw forward
// call (enqueue-ns/op: Enqueue, checks and launch) and of cuLaunchKernel
// alone for the same kernel, launch and parameter block (launch-ns/op), and
// their difference (overhead-ns/op), for operands whose Bytes are given
// and for operands whose allocation is asked of the driver.
func BenchmarkGPURawForwardOverhead(b *testing.B) {
	d, err := OpenDevice(0)
	if errors.Is(err, ErrNoGPU) {
		b.Skipf("no GPU: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	dims := Dims{B: 1, Nq: 128, Nk: 128, Hq: 1, Hkv: 1, D: 64}
	plan, err := d.NewRawForward(dims, FP16, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	qkv, err := d.ctx.Alloc(3 * FP16.Size() * dims.QShape().Numel())
	if err != nil {
		b.Fatal(err)
	}
	out, err := d.ctx.Alloc(FP16.Size() * dims.QShape().Numel())
	if err != nil {
		b.Fatal(err)
	}
	lse, err := d.ctx.Alloc(dims.LSEBytes())
	if err != nil {
		b.Fatal(err)
	}
	for _, query := range []bool{false, true} {
		name := "bytes-given"
		if query {
			name = "bytes-queried"
		}
		b.Run(name, func(b *testing.B) {
			q, k, v := packedQKV(dims, qkv.Ptr())
			a := RawForwardArgs{Q: q, K: k, V: v, Out: RawTensor{Ptr: out.Ptr(), Strides: dims.QShape().ContiguousStrides(), Bytes: out.Size()},
				LSE: RawBuffer{Ptr: lse.Ptr(), Bytes: lse.Size()}}
			if query {
				a.Q.Bytes, a.K.Bytes, a.V.Bytes, a.Out.Bytes, a.LSE.Bytes = 0, 0, 0, 0, 0
			}
			h := s.Handle()
			var enq, drv time.Duration
			i := 0
			for b.Loop() {
				t0 := time.Now()
				err := plan.Enqueue(h, &a)
				t1 := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				if err := d.ctx.Bind(); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				err = plan.kern.fn.LaunchBound(plan.cfg, h, plan.args)
				t3 := time.Now()
				d.ctx.Unbind()
				if err != nil {
					b.Fatal(err)
				}
				enq += t1.Sub(t0)
				drv += t3.Sub(t2)
				if i++; i%64 == 0 { // keep the queue short; not timed
					if err := s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			n := float64(b.N)
			b.ReportMetric(float64(enq.Nanoseconds())/n, "enqueue-ns/op")
			b.ReportMetric(float64(drv.Nanoseconds())/n, "launch-ns/op")
			b.ReportMetric(float64((enq-drv).Nanoseconds())/n, "overhead-ns/op")
		})
	}
}
