package flashattn_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/internal/cuda"
)

// The raw API's GPU tests. Memory comes from "another CUDA user": a
// cuda.Context of its own (the raw driver API: cuMemAlloc, cuMemcpyHtoD),
// which retains the same primary context as the Device, and a stream it
// creates; GoFlash only receives device addresses and the stream handle.

// rawUser is the other CUDA user of the process.
type rawUser struct {
	t   testing.TB
	ctx *cuda.Context
	s   *cuda.Stream
	bf  bool // the tensors rawBackend places and reads are bf16, not fp16
}

// dtype is the element type of the user's tensors.
func (u *rawUser) dtype() flashattn.DType {
	if u.bf {
		return flashattn.BF16
	}
	return flashattn.FP16
}

// bits converts xs to the user's element type (NaN stays NaN).
func (u *rawUser) bits(xs []float32) []uint16 {
	if !u.bf {
		return fp16(xs)
	}
	h := make([]uint16, len(xs))
	for i, x := range xs {
		h[i] = flashattn.Float32ToBF16(x)
	}
	return h
}

// nan is the poison of the user's outputs; float reads one element back.
func (u *rawUser) nan() uint16 {
	if u.bf {
		return 0x7fc0
	}
	return nan16
}

func (u *rawUser) float(h uint16) float32 {
	if u.bf {
		return flashattn.BF16ToFloat32(h)
	}
	return flashattn.FP16ToFloat32(h)
}

func newRawUser(t testing.TB) *rawUser {
	t.Helper()
	ctx, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Error(err)
		}
	})
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return &rawUser{t: t, ctx: ctx, s: s}
}

// devBuf is one allocation of the user, holding fp16 or float32 data.
type devBuf struct{ b *cuda.Buffer }

func (u *rawUser) upload16(bits []uint16) devBuf {
	u.t.Helper()
	b, err := u.ctx.Alloc(2 * len(bits))
	if err != nil {
		u.t.Fatal(err)
	}
	if err := cuda.CopyToDevice(b, bits); err != nil {
		u.t.Fatal(err)
	}
	return devBuf{b}
}

func (u *rawUser) upload32(x []float32) devBuf {
	u.t.Helper()
	b, err := u.ctx.Alloc(4 * len(x))
	if err != nil {
		u.t.Fatal(err)
	}
	if err := cuda.CopyToDevice(b, x); err != nil {
		u.t.Fatal(err)
	}
	return devBuf{b}
}

// fp16 of every element of xs (NaN padding included).
func fp16(xs []float32) []uint16 {
	h := make([]uint16, len(xs))
	for i, x := range xs {
		h[i] = flashattn.Float32ToFP16(x)
	}
	return h
}

// rawLayout is where one host tensor lives on the device.
type rawLayout struct {
	buf devBuf
	off int // elements from the buffer's start
	st  flashattn.Strides
}

func (l rawLayout) raw(bytes int) flashattn.RawTensor {
	return flashattn.RawTensor{Ptr: l.buf.b.Ptr() + uint64(2*l.off), Strides: l.st, Bytes: bytes}
}

// rawOK says whether the kernels take strides st at element offset off.
func rawOK(st flashattn.Strides, off int) bool {
	return st[3] == 1 && st[0]%8 == 0 && st[1]%8 == 0 && st[2]%8 == 0 && off%8 == 0
}

// paddedStrides keeps the order of B, N and H of st (BHSD stays BHSD) with
// rows padded to a multiple of 8 elements plus 8, so that a kernel reading
// or writing past D meets the padding.
func paddedStrides(s flashattn.Shape, st flashattn.Strides) flashattn.Strides {
	ext := [3]int{s.B, s.N, s.H}
	order := []int{0, 1, 2} // outermost first
	for i := 1; i < 3; i++ {
		for j := i; j > 0 && st[order[j]] > st[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var out flashattn.Strides
	out[3] = 1
	step := (s.D+7)/8*8 + 8
	for i := 2; i >= 0; i-- {
		out[order[i]] = step
		step *= ext[order[i]]
	}
	return out
}

// place uploads host tensors as they lie: tensors that share one host
// array (packed QKV) share one device buffer at their offsets, when the
// kernels take their strides; any other is copied into paddedStrides.
func (u *rawUser) place(ts ...*flashattn.Tensor) []rawLayout {
	u.t.Helper()
	out := make([]rawLayout, len(ts))
	type group struct {
		base []float32
		buf  devBuf
	}
	groups := map[*float32]*group{}
	end := func(t *flashattn.Tensor) *float32 { return &t.Data[:cap(t.Data)][cap(t.Data)-1] }
	shared := map[*float32]bool{}
	for _, t := range ts {
		g := groups[end(t)]
		if g == nil {
			g = &group{}
			groups[end(t)] = g
		}
		if cap(t.Data) > cap(g.base) {
			g.base = t.Data[:cap(t.Data)]
		}
	}
	for _, t := range ts {
		g := groups[end(t)]
		if !rawOK(t.Strides, cap(g.base)-cap(t.Data)) {
			shared[end(t)] = false
		} else if _, seen := shared[end(t)]; !seen {
			shared[end(t)] = true
		}
	}
	for i, t := range ts {
		g := groups[end(t)]
		if shared[end(t)] {
			if g.buf.b == nil {
				g.buf = u.upload16(u.bits(g.base))
			}
			out[i] = rawLayout{buf: g.buf, off: cap(g.base) - cap(t.Data), st: t.Strides}
			continue
		}
		st := paddedStrides(t.Shape, t.Strides)
		host := make([]float32, t.Shape.Span(st))
		for j := range host {
			host[j] = float32(math.NaN())
		}
		dst := &flashattn.Tensor{Shape: t.Shape, Strides: st, Data: host}
		copyTensor(dst, t)
		out[i] = rawLayout{buf: u.upload16(u.bits(host)), st: st}
	}
	return out
}

func copyTensor(dst, src *flashattn.Tensor) {
	s := src.Shape
	for b := range s.B {
		for n := range s.N {
			for h := range s.H {
				for x := range s.D {
					dst.Set(b, n, h, x, src.At(b, n, h, x))
				}
			}
		}
	}
}

// output allocates an output of shape s in a padded BHSD layout, every
// element and the padding poisoned with NaN.
func (u *rawUser) output(s flashattn.Shape) rawLayout {
	st := paddedStrides(s, flashattn.Strides{s.H * s.N, 1, s.N, 1}) // B, H, N order
	p := poison16(s.Span(st))
	for i := range p {
		p[i] = u.nan()
	}
	return rawLayout{buf: u.upload16(p), st: st}
}

const nan16 = 0x7e00

func poison16(n int) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		h[i] = nan16
	}
	return h
}

// download reads an output back as a dense tensor and checks that nothing
// was written outside its elements (the padding is still poison).
func (u *rawUser) download(l rawLayout, s flashattn.Shape) *flashattn.Tensor {
	u.t.Helper()
	bits := make([]uint16, s.Span(l.st))
	if err := cuda.CopyFromDevice(bits, l.buf.b); err != nil {
		u.t.Fatal(err)
	}
	mine := make([]bool, len(bits))
	out := flashattn.New(s)
	for b := range s.B {
		for n := range s.N {
			for h := range s.H {
				for x := range s.D {
					i := b*l.st[0] + n*l.st[1] + h*l.st[2] + x
					mine[i] = true
					out.Set(b, n, h, x, u.float(bits[i]))
				}
			}
		}
	}
	for i, m := range mine {
		if !m && bits[i] != u.nan() {
			u.t.Errorf("padding element %d written: %#04x", i, bits[i])
			break
		}
	}
	return out
}

func (u *rawUser) lseBuffer(d flashattn.Dims) devBuf {
	x := make([]float32, d.LSELen())
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return u.upload32(x)
}

func (u *rawUser) free(bs ...devBuf) {
	for _, b := range bs {
		if err := b.b.Free(); err != nil {
			u.t.Error(err)
		}
	}
}

// rawBackend runs the conformance suite's host tensors through the raw API
// on dev: inputs placed as they lie (packed QKV shares one buffer), outputs
// in padded BHSD, inputs given with Bytes 0 (the driver is asked), outputs
// with their exact extent, on the user's stream.
func rawBackend(dev *flashattn.Device, u *rawUser, name string) attntest.Backend {
	fwd := func(q, k, v *flashattn.Tensor, o *flashattn.Options) (*flashattn.Result, error) {
		d, err := flashattn.DimsOf(q, k, v)
		if err != nil {
			return nil, err
		}
		plan, err := dev.NewRawForward(d, u.dtype(), o)
		if err != nil {
			return nil, err
		}
		in := u.place(q, k, v)
		out, lse := u.output(d.QShape()), u.lseBuffer(d)
		defer u.free(out.buf, lse)
		for _, l := range in {
			defer u.free(l.buf) // a shared buffer is freed once: Free is idempotent
		}
		err = plan.Enqueue(u.s.Handle(), &flashattn.RawForwardArgs{
			Q: in[0].raw(0), K: in[1].raw(0), V: in[2].raw(0),
			Out: out.raw(u.dtype().Size() * d.QShape().Span(out.st)),
			LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr(), Bytes: d.LSEBytes()},
		})
		if err != nil {
			return nil, err
		}
		if err := u.s.Synchronize(); err != nil {
			return nil, err
		}
		res := &flashattn.Result{Dims: d, Out: u.download(out, d.QShape()), LSE: make([]float32, d.LSELen()),
			Backend: flashattn.GPU, Reason: fmt.Sprintf("raw %s on %s", plan.Kernel().Symbol, dev.Info())}
		return res, cuda.CopyFromDevice(res.LSE, lse.b)
	}
	bwd := func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
		d, err := flashattn.DimsOf(q, k, v)
		if err != nil {
			return nil, err
		}
		plan, err := dev.NewRawBackward(d, u.dtype(), o)
		if err != nil {
			return nil, err
		}
		if u.bf {
			for _, k := range plan.Kernels() {
				if k.DType != flashattn.BF16 {
					return nil, fmt.Errorf("bf16 raw backward plan runs %s (%v)", k.Symbol, k.DType)
				}
			}
		}
		in := u.place(q, k, v, out, dOut)
		for _, l := range in {
			defer u.free(l.buf)
		}
		lb := u.upload32(lse)
		di := u.lseBuffer(d)
		dq, dk, dv := u.output(d.QShape()), u.output(d.KVShape()), u.output(d.KVShape())
		defer u.free(lb, di, dq.buf, dk.buf, dv.buf)
		err = plan.Enqueue(u.s.Handle(), &flashattn.RawBackwardArgs{
			Q: in[0].raw(0), K: in[1].raw(0), V: in[2].raw(0), Out: in[3].raw(0), DOut: in[4].raw(0),
			LSE: flashattn.RawBuffer{Ptr: lb.b.Ptr()},
			DQ:  dq.raw(0), DK: dk.raw(u.dtype().Size() * d.KVShape().Span(dk.st)), DV: dv.raw(0),
			Di: flashattn.RawBuffer{Ptr: di.b.Ptr(), Bytes: d.DiBytes()},
		})
		if err != nil {
			return nil, err
		}
		if err := u.s.Synchronize(); err != nil {
			return nil, err
		}
		return &flashattn.Grads{DQ: u.download(dq, d.QShape()), DK: u.download(dk, d.KVShape()), DV: u.download(dv, d.KVShape()),
			Backend: flashattn.GPU, Reason: "raw on " + dev.Info().String()}, nil
	}
	b := attntest.Backend{Name: name, Precision: attntest.FP16, Forward: fwd, Backward: bwd, HeadDims: dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil),
		Plain: true} // raw plans run the plain kernels only: they refuse a window, softcap or ALiBi
	if u.bf {
		b.Precision = attntest.BF16
	}
	return b
}

// runRawConformance runs every case of the suite, forward and backward,
// through rawBackend (the suite's error cases check the host API's
// argument checks, which the raw API does not have; TestGPURawErrors and
// the CPU tests check its own).
func runRawConformance(t *testing.T, path int, bf16 bool) {
	dev := openGPU(t)
	if path != 0 {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
	}
	if p := defaultPath(t, dev); bf16 && p < 80 {
		t.Skipf("%s runs the sm_%d path, which has no bf16 kernels", dev.Info(), p)
	}
	u := newRawUser(t)
	u.bf = bf16
	b := rawBackend(dev, u, fmt.Sprintf("raw-path%d-%v", path, u.dtype()))
	t.Logf("%s, path %d, head dims %v", dev.Info(), path, b.HeadDims)
	bwdDims := dev.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil)
	for _, c := range attntest.Cases() {
		bc := b
		if b.Backward != nil && slices.Contains(b.HeadDims, c.D) && !slices.Contains(bwdDims, c.D) {
			bc.Backward = nil // no three-kernel backward (D 256): TestGPURawErrors checks the refusal
		}
		t.Run(c.Name, func(t *testing.T) { attntest.RunCase(t, bc, c) })
	}
}

// TestGPURawConformance: the raw forward and backward, on the device's
// own kernel path, with the suite's layouts (packed QKV without copies,
// head-major, strided D re-laid out by the caller) and padded BHSD outputs.
func TestGPURawConformance(t *testing.T) { runRawConformance(t, 0, false) }

// TestGPURawConformanceBF16 is TestGPURawConformance, forward and backward,
// on the bf16 kernels (skipped on Turing GPUs).
func TestGPURawConformanceBF16(t *testing.T) { runRawConformance(t, 0, true) }

// TestGPURawConformanceSM75 is TestGPURawConformance on the Turing kernels
// (compute_75 PTX through the driver's JIT).
func TestGPURawConformanceSM75(t *testing.T) { runRawConformance(t, 75, false) }

// TestGPURawConformanceSM80 is TestGPURawConformance on the sm_80 path
// forced: on an H100/H200 the mma.sync forward instead of the Hopper one.
func TestGPURawConformanceSM80(t *testing.T) {
	if dev := openGPU(t); dev.Info().Arch() < 80 {
		t.Skipf("%s has no sm_80 path", dev.Info())
	}
	runRawConformance(t, 80, false)
}

// TestGPURawInterop is the proof of interop: packed QKV (B, N, 3, H, D)
// allocated and filled by another CUDA user of the process, consumed in
// place (the device's free memory does not move during the calls) on that
// user's stream, forward then backward, checked against the reference.
func TestGPURawInterop(t *testing.T) {
	dev := openGPU(t)
	u := newRawUser(t)
	d := flashattn.Dims{B: 2, Nq: 130, Nk: 130, Hq: 4, Hkv: 4, D: 64}
	o := &flashattn.Options{Causal: true}
	fwd, err := dev.NewRawForward(d, flashattn.FP16, o)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := dev.NewRawBackward(d, flashattn.FP16, o)
	if err != nil {
		t.Fatal(err)
	}
	// The packed projection: token (b, n) holds q, k, v heads one after another.
	w := 3 * d.Hq * d.D
	st := flashattn.Strides{d.Nq * w, w, d.D, 1}
	host := flashattn.Random(flashattn.Shape{B: d.B, N: d.Nq, H: 3 * d.Hq, D: d.D}, 7).Data
	for i := range host {
		host[i] = attntest.RoundHalf(host[i])
	}
	view := func(part int) *flashattn.Tensor {
		return &flashattn.Tensor{Shape: d.QShape(), Strides: st, Data: host[part*d.Hq*d.D:]}
	}
	q, k, v := view(0), view(1), view(2)
	dO := flashattn.Random(d.QShape(), 8)
	qkv := u.upload16(fp16(host))
	at := func(part int) flashattn.RawTensor {
		return flashattn.RawTensor{Ptr: qkv.b.Ptr() + uint64(2*part*d.Hq*d.D), Strides: st}
	}
	dense := d.QShape().ContiguousStrides()
	out, lse := u.upload16(poison16(d.QShape().Numel())), u.lseBuffer(d)
	dOb, di := u.upload16(fp16(dO.Data)), u.lseBuffer(d)
	// The gradients packed like the inputs: dQKV (B, N, 3, H, D).
	dqkv := u.upload16(poison16(len(host)))
	defer u.free(qkv, out, lse, dOb, di, dqkv)
	gat := func(part int) flashattn.RawTensor {
		return flashattn.RawTensor{Ptr: dqkv.b.Ptr() + uint64(2*part*d.Hq*d.D), Strides: st}
	}
	run := func() {
		t.Helper()
		err := fwd.Enqueue(u.s.Handle(), &flashattn.RawForwardArgs{Q: at(0), K: at(1), V: at(2),
			Out: flashattn.RawTensor{Ptr: out.b.Ptr(), Strides: dense}, LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr()}})
		if err != nil {
			t.Fatal(err)
		}
		err = bwd.Enqueue(u.s.Handle(), &flashattn.RawBackwardArgs{Q: at(0), K: at(1), V: at(2),
			Out: flashattn.RawTensor{Ptr: out.b.Ptr(), Strides: dense}, DOut: flashattn.RawTensor{Ptr: dOb.b.Ptr(), Strides: dense},
			LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr()}, DQ: gat(0), DK: gat(1), DV: gat(2), Di: flashattn.RawBuffer{Ptr: di.b.Ptr()}})
		if err != nil {
			t.Fatal(err)
		}
		if err := u.s.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	// The first run may make the driver load kernel code or grow its local
	// memory; the second, measured, must not move the free memory.
	run()
	free0, _, err := u.ctx.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	run()
	free1, _, err := u.ctx.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free1 != free0 {
		t.Errorf("free device memory went from %d to %d bytes across the raw calls: they allocate", free0, free1)
	}
	res := &flashattn.Result{Dims: d, Out: u.download(rawLayout{buf: out, st: dense}, d.QShape()), LSE: make([]float32, d.LSELen()), Backend: flashattn.GPU}
	if err := cuda.CopyFromDevice(res.LSE, lse.b); err != nil {
		t.Fatal(err)
	}
	g := &flashattn.Grads{Backend: flashattn.GPU}
	for i, dst := range []**flashattn.Tensor{&g.DQ, &g.DK, &g.DV} {
		l := rawLayout{buf: dqkv, off: i * d.Hq * d.D, st: st}
		*dst = downloadAt(t, l, d.QShape())
	}
	truth := attntest.Reference(q, k, v, dO, o.Causal, 1/math.Sqrt(float64(d.D)))
	base := attntest.Baseline(attntest.FP16, q, k, v, dO, o.Causal, 1/math.Sqrt(float64(d.D)))
	if attntest.CheckForward(t, attntest.FP16, truth, base, res) && attntest.CheckBackward(t, attntest.FP16, truth, base, g) {
		t.Logf("%s: packed QKV %v from another CUDA user, forward %s and backward %v on its stream: match the reference",
			dev.Info(), d, fwd.Kernel().Symbol, len(bwd.Kernels()))
	}
}

// downloadAt reads a view at an offset of a shared buffer as a dense tensor.
func downloadAt(t *testing.T, l rawLayout, s flashattn.Shape) *flashattn.Tensor {
	t.Helper()
	bits := make([]uint16, l.buf.b.Size()/2)
	if err := cuda.CopyFromDevice(bits, l.buf.b); err != nil {
		t.Fatal(err)
	}
	out := flashattn.New(s)
	for b := range s.B {
		for n := range s.N {
			for h := range s.H {
				for x := range s.D {
					out.Set(b, n, h, x, flashattn.FP16ToFloat32(bits[l.off+b*l.st[0]+n*l.st[1]+h*l.st[2]+x]))
				}
			}
		}
	}
	return out
}

// TestGPURawErrors: what only the device can refuse, each before any
// launch: an address in no allocation, an allocation shorter than the
// call reaches, a plan whose kernels were reloaded, a closed device,
// and (with a second GPU) memory and a stream of another device's context.
func TestGPURawErrors(t *testing.T) {
	dev := openGPU(t)
	u := newRawUser(t)
	d := flashattn.Dims{B: 1, Nq: 64, Nk: 64, Hq: 2, Hkv: 2, D: 64}
	plan, err := dev.NewRawForward(d, flashattn.FP16, nil)
	if err != nil {
		t.Fatal(err)
	}
	dense := d.QShape().ContiguousStrides()
	n := d.QShape().Numel()
	q, k, v, o := u.upload16(poison16(n)), u.upload16(poison16(n)), u.upload16(poison16(n)), u.upload16(poison16(n))
	short := u.upload16(poison16(n / 2))
	lse := u.lseBuffer(d)
	defer u.free(q, k, v, o, short, lse)
	args := func() flashattn.RawForwardArgs {
		return flashattn.RawForwardArgs{
			Q: flashattn.RawTensor{Ptr: q.b.Ptr(), Strides: dense}, K: flashattn.RawTensor{Ptr: k.b.Ptr(), Strides: dense},
			V: flashattn.RawTensor{Ptr: v.b.Ptr(), Strides: dense}, Out: flashattn.RawTensor{Ptr: o.b.Ptr(), Strides: dense},
			LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr()},
		}
	}
	if err := plan.Enqueue(u.s.Handle(), ptr(args())); err != nil {
		t.Fatalf("good call: %v", err)
	}
	if err := u.s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	wantData := func(name, arg, reason string, err error) {
		t.Helper()
		var e *flashattn.DataError
		if !errors.As(err, &e) || e.Arg != arg || !strings.Contains(e.Reason, reason) {
			t.Errorf("%s: %v, want a *DataError for %s saying %q", name, err, arg, reason)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	a := args()
	a.K.Ptr = 1 << 44 // no allocation there
	wantData("address in no allocation", "k", "lies in no CUDA allocation", plan.Enqueue(u.s.Handle(), &a))
	// The driver reports an allocation's size as it keeps it (perhaps
	// rounded up): the views below are placed against what it reports.
	probe := cuda.NewProbe()
	need := uint64(flashattn.FP16.Size() * n)
	if _, size, _, err := u.ctx.AddressRange(short.b.Ptr(), probe); err != nil {
		t.Fatal(err)
	} else if size < need {
		a = args()
		a.V.Ptr = short.b.Ptr()
		wantData("short allocation", "v", "its allocation has", plan.Enqueue(u.s.Handle(), &a))
	} else {
		t.Logf("the driver reports %d bytes for an allocation of %d: no short-allocation case", size, short.b.Size())
	}
	start, size, _, err := u.ctx.AddressRange(q.b.Ptr(), probe)
	if err != nil {
		t.Fatal(err)
	}
	a = args()
	a.Out.Ptr = (start + size - need + 16 + 15) &^ 15 // its allocation ends at least 16 bytes early for this view
	wantData("view past its allocation's end", "out", "its allocation has", plan.Enqueue(u.s.Handle(), &a))

	// bf16: forward and backward plans on sm_80 and newer, their kernels
	// the _bf16 ones (TestBF16RefusedOnSM75 covers sm_75).
	var ue *flashattn.UnsupportedError
	if bp, err := dev.NewRawForward(d, flashattn.BF16, nil); err != nil || !strings.HasSuffix(bp.Kernel().Symbol, "_bf16") {
		if k, _ := forwardKernel(dev, d, false); k.Path >= 80 || !errors.As(err, &ue) || ue.Feature != "dtype" {
			t.Errorf("bf16 forward plan: %v", err)
		}
	}
	if bp, err := dev.NewRawBackward(d, flashattn.BF16, &flashattn.Options{Causal: true}); err != nil {
		if k, _ := forwardKernel(dev, d, false); k.Path >= 80 || !errors.As(err, &ue) || ue.Feature != "dtype" {
			t.Errorf("bf16 backward plan: %v", err)
		}
	} else {
		for _, k := range bp.Kernels() {
			if !strings.Contains(k.Symbol, "_bf16") || k.DType != flashattn.BF16 {
				t.Errorf("bf16 backward plan runs %+v", k)
			}
		}
	}

	for _, hd := range dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil) {
		if slices.Contains(dev.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil), hd) {
			continue
		}
		_, err := dev.NewRawBackward(flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: hd}, flashattn.FP16, nil)
		if !errors.As(err, &ue) || ue.Feature != "head dim" {
			t.Errorf("backward plan for D %d (no backward kernels): %v, want an *UnsupportedError for the head dim", hd, err)
		}
	}

	if gpus, _ := cuda.DeviceCount(); gpus > 1 {
		other, err := cuda.Open(1)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := other.Close(); err != nil {
				t.Error(err)
			}
		}()
		s1, err := other.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		wantData("stream of GPU 1", "stream", "another CUDA context", plan.Enqueue(s1.Handle(), ptr(args())))
		b1, err := other.Alloc(2 * n)
		if err != nil {
			t.Fatal(err)
		}
		a = args()
		a.Q.Ptr = b1.Ptr()
		wantData("memory of GPU 1", "q", "is memory of GPU", plan.Enqueue(u.s.Handle(), &a))
	} else {
		t.Log("one GPU: the other-context stream and memory checks need two")
	}

	if err := dev.ForcePath(75); err != nil {
		t.Fatal(err)
	}
	wantData("plan made before ForcePath", "plan", "were reloaded (ForcePath)", plan.Enqueue(u.s.Handle(), ptr(args())))
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := plan.Enqueue(u.s.Handle(), ptr(args())); !errors.Is(err, flashattn.ErrDeviceClosed) {
		t.Errorf("closed device: %v, want ErrDeviceClosed", err)
	}
}

func ptr[T any](x T) *T { return &x }

// TestGPURawEnqueueAllocs: a raw call, the driver's queries and the launch
// included, allocates nothing on the Go heap.
func TestGPURawEnqueueAllocs(t *testing.T) {
	dev := openGPU(t)
	u := newRawUser(t)
	d := flashattn.Dims{B: 1, Nq: 128, Nk: 128, Hq: 1, Hkv: 1, D: 64}
	plan, err := dev.NewRawForward(d, flashattn.FP16, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := d.QShape().Numel()
	dense := d.QShape().ContiguousStrides()
	q, o, lse := u.upload16(poison16(n)), u.upload16(poison16(n)), u.lseBuffer(d)
	defer u.free(q, o, lse)
	for _, bytes := range []int{2 * n, 0} {
		a := flashattn.RawForwardArgs{
			Q: flashattn.RawTensor{Ptr: q.b.Ptr(), Strides: dense, Bytes: bytes}, K: flashattn.RawTensor{Ptr: q.b.Ptr(), Strides: dense, Bytes: bytes},
			V: flashattn.RawTensor{Ptr: q.b.Ptr(), Strides: dense, Bytes: bytes}, Out: flashattn.RawTensor{Ptr: o.b.Ptr(), Strides: dense, Bytes: bytes},
			LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr()},
		}
		if bytes > 0 {
			a.LSE.Bytes = d.LSEBytes()
		}
		h := u.s.Handle()
		allocs := testing.AllocsPerRun(100, func() {
			if err := plan.Enqueue(h, &a); err != nil {
				t.Fatal(err)
			}
		})
		if err := u.s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("Bytes %d: %v allocations per Enqueue, want 0", bytes, allocs)
		}
	}
}
