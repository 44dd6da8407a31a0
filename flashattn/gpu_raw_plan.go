package flashattn

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// RawForward is the forward pass of one problem prepared on one device for
// raw calls: its kernel, launch and parameter block, made once and reused
// by every Enqueue, which takes caller-owned device memory and a stream.
// A Device uses the GPU's primary context, the CUDA runtime's, so
// addresses and streams that PyTorch, PJRT or other CUDA code of the
// process made on that GPU are valid as they are. A plan is safe for
// concurrent use: calls on a Device, raw or not, run one at a time (an
// Enqueue waits while a synchronous Forward of the same Device runs).
type RawForward struct {
	rawPlan
	kern   *loadedKernel
	cfg    cuda.LaunchConfig
	params *kernels.FwdParams
	args   *cuda.Args
	// A Hopper plan (kern the sm_90a forward): params is h.P, and h's tensor
	// maps are encoded at each Enqueue; alt, the sm_80 kernel of the same
	// problem, runs the calls whose strides TMA cannot address (a stride of
	// 0: broadcast operands), with altArgs on the same params.
	h       *kernels.Sm90FwdArgs
	alt     *loadedKernel
	altCfg  cuda.LaunchConfig
	altArgs *cuda.Args
}

// NewRawForward prepares raw forward calls of problem dims in element type
// dt: it loads the kernel and checks the problem once. The options used are
// Causal and Scale. A dtype, head dim or size the device's kernels lack is
// an *UnsupportedError.
func (d *Device) NewRawForward(dims Dims, dt DType, o *Options) (*RawForward, error) {
	why := "raw calls run the plain kernels only (Device.Forward runs score modifiers)"
	return newRawPlan(d, dims, dt, o, why, func(r rawPlan) (*RawForward, error) {
		pl, ks, err := d.plan(planRequest{op: opRawForward, p: r.p, dt: dt})
		if err != nil {
			return nil, err
		}
		r.mod = ks[0].mod
		return newRawForward(r, pl, ks), nil
	})
}

// newRawForward fills the parts of the plan no call changes: pl's kernel,
// loaded as ks (a Hopper plan's sm_80 kernel after it), and launch.
func newRawForward(r rawPlan, pl plan, ks []*loadedKernel) *RawForward {
	f := &RawForward{rawPlan: r, kern: ks[0], cfg: pl.cfgs[0]}
	if pl.alt != nil { // a Hopper plan
		f.h = new(kernels.Sm90FwdArgs)
		f.params = &f.h.P
		f.args = cuda.NewArgs(unsafe.Pointer(f.h))
		f.alt, f.altCfg = ks[1], pl.altCfg
		f.altArgs = cuda.NewArgs(unsafe.Pointer(f.params))
	} else {
		f.params = new(kernels.FwdParams)
		f.args = cuda.NewArgs(unsafe.Pointer(f.params))
	}
	fieldsOf(r.p).setFwd(f.params)
	q := f.params
	f.fields = rawFields{ptrs: [10]*uint64{&q.Q, &q.K, &q.V, &q.O, &q.LSE}, strides: [8][3]*int64{{&q.QBatchStride, &q.QRowStride, &q.QHeadStride},
		{&q.KBatchStride, &q.KRowStride, &q.KHeadStride}, {&q.VBatchStride, &q.VRowStride, &q.VHeadStride}, {&q.OBatchStride, &q.ORowStride, &q.OHeadStride}}}
	return f
}

// Dims is the problem the plan is for (the zero Dims for a nil *RawForward).
func (f *RawForward) Dims() Dims {
	if f == nil {
		return Dims{}
	}
	return f.p.Dims
}

// Kernel is the kernel Enqueue launches (the zero KernelInfo for a nil or
// zero plan).
func (f *RawForward) Kernel() KernelInfo {
	if f == nil || f.kern == nil {
		return KernelInfo{}
	}
	return f.kern.info
}

// errZeroPlan is the error of Enqueue on a plan not made by NewRawForward
// or NewRawBackward.
func errZeroPlan(what string) error {
	return &DataError{Arg: "plan", Reason: fmt.Sprintf("a nil or zero %s (not made by Device.New%[1]s)", what)}
}

// CheckRawForward checks a raw forward call's operands for problem dims
// in element type dt as far as it can without a GPU: every address set and
// aligned, strides the kernels honour, outputs without aliased elements,
// operands within the Bytes given (Bytes 0 is left to Enqueue, which asks
// the driver), and no output sharing a byte with another operand. Enqueue
// runs the same checks, the last one after the driver's allocation bounds
// (so that a view running past its allocation is named as such, not as the
// operand it runs into).
func CheckRawForward(dims Dims, dt DType, a *RawForwardArgs) error {
	return checkRaw(dims, dt, rawFwdOperands, a.operands())
}

// operands are a's operand fields, in rawFwdOperands' order (none for nil).
func (a *RawForwardArgs) operands() rawArgs {
	if a == nil {
		return rawArgs{}
	}
	return rawArgs{ts: [8]*RawTensor{&a.Q, &a.K, &a.V, &a.Out}, bufs: [2]*RawBuffer{&a.LSE}}
}

// Enqueue checks a (CheckRawForward's checks of each operand, then the
// driver's answers for operands with Bytes 0 and for the stream, then that
// no output overlaps another operand) and enqueues the forward kernel on
// stream, a CUstream of the device's primary context (Stream.Handle, or a
// handle from other CUDA code; 0 is the legacy default stream). It returns
// once the kernel is enqueued: Out and the LSE are written when the stream
// gets there, and a kernel fault is reported by a later synchronisation.
// Every error comes before the launch.
func (f *RawForward) Enqueue(stream uintptr, a *RawForwardArgs) error {
	if f == nil || f.d == nil || f.kern == nil {
		return errZeroPlan("RawForward")
	}
	if err := f.begin(stream, rawFwdOperands, a.operands()); err != nil {
		return err
	}
	defer f.d.mu.Unlock()
	kern, cfg, args := f.kern, f.cfg, f.args
	if f.h != nil {
		if err := encodeSM90A(f.d.tmaps, kern.v, f.h); errors.Is(err, errNoTensorMap) {
			kern, cfg, args = f.alt, f.altCfg, f.altArgs
		} else if err != nil {
			return fmt.Errorf("flashattn: %s on %s: %w", kern.info.Symbol, f.d.info, err)
		}
	}
	return f.launch(kern, cfg, stream, args)
}

// RawBackward is the backward pass of one problem prepared on one device
// for raw calls: its three kernels (pre, dK/dV, dQ), launches and parameter
// block, made once and reused by every Enqueue.
type RawBackward struct {
	rawPlan
	ks     [3]*loadedKernel
	cfgs   [3]cuda.LaunchConfig
	params *kernels.BwdParams
	args   *cuda.Args
}

// NewRawBackward prepares raw backward calls of problem dims in element
// type dt, as NewRawForward does the forward's: every tensor operand of its
// calls (q, k, v, out, dOut and the gradients) is of that dtype. Options
// (Causal, Scale) must be those of the forward call; it runs the three-kernel
// backward whatever Options.Deterministic says (bit-reproducible; the single
// pass would need a dQ accumulator the raw arguments do not hold).
func (d *Device) NewRawBackward(dims Dims, dt DType, o *Options) (*RawBackward, error) {
	// The plain three kernels only: a window, softcap or ALiBi needs the
	// _mod pair and its parameters, which Device.Backward sets up.
	why := "the raw backward runs the plain three kernels; Device.Backward runs the modifiers' backward"
	return newRawPlan(d, dims, dt, o, why, func(r rawPlan) (*RawBackward, error) {
		// The raw backward takes the caller's Di workspace and nothing else, so
		// it runs the three-kernel backward (no dQ accumulator): deterministic.
		r.p.Deterministic = true
		pl, ks, err := d.plan(planRequest{op: opRawBackward, p: r.p, dt: dt})
		if err != nil {
			return nil, err
		}
		r.mod = ks[0].mod
		return newRawBackward(r, pl, ks), nil
	})
}

// newRawBackward fills the parts of the plan no call changes: pl's three
// kernels, loaded as ks, and launches.
func newRawBackward(r rawPlan, pl plan, ks []*loadedKernel) *RawBackward {
	b := &RawBackward{rawPlan: r, params: new(kernels.BwdParams)}
	copy(b.ks[:], ks)
	copy(b.cfgs[:], pl.cfgs)
	fieldsOf(r.p).setBwd(b.params)
	b.args = cuda.NewArgs(unsafe.Pointer(b.params))
	q := b.params
	b.fields = rawFields{ptrs: [10]*uint64{&q.Q, &q.K, &q.V, &q.O, &q.DO, &q.DQ, &q.DK, &q.DV, &q.LSE, &q.Di}, strides: [8][3]*int64{
		{&q.QBatchStride, &q.QRowStride, &q.QHeadStride}, {&q.KBatchStride, &q.KRowStride, &q.KHeadStride}, {&q.VBatchStride, &q.VRowStride, &q.VHeadStride},
		{&q.OBatchStride, &q.ORowStride, &q.OHeadStride}, {&q.DOBatchStride, &q.DORowStride, &q.DOHeadStride},
		{&q.DQBatchStride, &q.DQRowStride, &q.DQHeadStride}, {&q.DKBatchStride, &q.DKRowStride, &q.DKHeadStride}, {&q.DVBatchStride, &q.DVRowStride, &q.DVHeadStride}}}
	return b
}

// Dims is the problem the plan is for (the zero Dims for a nil *RawBackward).
func (b *RawBackward) Dims() Dims {
	if b == nil {
		return Dims{}
	}
	return b.p.Dims
}

// Kernels are the kernels Enqueue launches, in order: pre (Di), dK/dV, dQ
// (nil for a nil or zero plan).
func (b *RawBackward) Kernels() []KernelInfo {
	if b == nil || b.ks[0] == nil || b.ks[1] == nil || b.ks[2] == nil {
		return nil
	}
	return []KernelInfo{b.ks[0].info, b.ks[1].info, b.ks[2].info}
}

// CheckRawBackward is CheckRawForward for the backward's operands.
func CheckRawBackward(dims Dims, dt DType, a *RawBackwardArgs) error {
	return checkRaw(dims, dt, rawBwdOperands, a.operands())
}

// operands are a's operand fields, in rawBwdOperands' order (none for nil).
func (a *RawBackwardArgs) operands() rawArgs {
	if a == nil {
		return rawArgs{}
	}
	return rawArgs{ts: [8]*RawTensor{&a.Q, &a.K, &a.V, &a.Out, &a.DOut, &a.DQ, &a.DK, &a.DV}, bufs: [2]*RawBuffer{&a.LSE, &a.Di}}
}

// Enqueue is RawForward.Enqueue for the backward: it enqueues pre, dK/dV
// and dQ on stream and returns. The LSE must be the forward's for the same
// q, k, v and options (a -Inf LSE row is read as one that sees no key,
// which the raw call cannot check on the host).
func (b *RawBackward) Enqueue(stream uintptr, a *RawBackwardArgs) error {
	if b == nil || b.d == nil || b.ks[0] == nil || b.ks[1] == nil || b.ks[2] == nil {
		return errZeroPlan("RawBackward")
	}
	if err := b.begin(stream, rawBwdOperands, a.operands()); err != nil {
		return err
	}
	defer b.d.mu.Unlock()
	for i, k := range b.ks {
		if err := b.launch(k, b.cfgs[i], stream, b.args); err != nil {
			return err
		}
	}
	return nil
}

// begin starts an Enqueue of a call with operands spec, the fields of its
// args: it checks them (rawOps), takes the device, asks the driver about
// them and the stream (ready), refuses overlapping outputs, and writes their addresses and strides into
// the parameter block. On success the caller holds d.mu.
func (r *rawPlan) begin(stream uintptr, spec []rawOperand, a rawArgs) error {
	var ops [10]rawOp
	if err := rawOps(ops[:len(spec)], spec, a, r.p.Dims, r.dt); err != nil {
		return err
	}
	if err := r.d.lock(); err != nil {
		return err
	}
	if err := r.ready(stream, ops[:len(spec)]); err != nil {
		r.d.mu.Unlock()
		return err
	}
	if err := checkOverlaps(ops[:len(spec)]); err != nil {
		r.d.mu.Unlock()
		return err
	}
	r.fields.fill(a)
	return nil
}

// launch enqueues kernel k of the plan on stream; d.mu is held.
func (r *rawPlan) launch(k *loadedKernel, cfg cuda.LaunchConfig, stream uintptr, args *cuda.Args) error {
	if err := k.fn.LaunchOn(cfg, stream, args); err != nil {
		return fmt.Errorf("flashattn: launching %s on %s: %w", k.info.Symbol, r.d.info, err)
	}
	return nil
}

// rawOperand is one operand of a raw call, named as in errors: a tensor
// of the keys' shape (kv) or q's, or a buffer of LSELen float32 (buf: the
// LSE, Di); out: the call writes it.
type rawOperand struct {
	name         string
	kv, buf, out bool
}

// The operands of the raw calls, tensors first, in the order their args
// list them.
var (
	rawFwdOperands = []rawOperand{{name: "q"}, {name: "k", kv: true}, {name: "v", kv: true}, {name: "out", out: true},
		{name: "lse", buf: true, out: true}}
	rawBwdOperands = []rawOperand{{name: "q"}, {name: "k", kv: true}, {name: "v", kv: true}, {name: "out"}, {name: "dOut"},
		{name: "dQ", out: true}, {name: "dK", kv: true, out: true}, {name: "dV", kv: true, out: true},
		{name: "lse", buf: true}, {name: "Di", buf: true, out: true}}
)

// rawArgs are the fields of a raw call's args, in the order of its
// rawOperands: the tensors', then the buffers'. Only pointers: a struct
// with the names that errors keep would let the caller's args escape.
type rawArgs struct {
	ts   [8]*RawTensor
	bufs [2]*RawBuffer
}

// checkRaw is CheckRawForward and CheckRawBackward: the problem, then the
// operands.
func checkRaw(dims Dims, dt DType, spec []rawOperand, a rawArgs) error {
	if err := checkRawDims(dims, dt); err != nil {
		return err
	}
	var ops [10]rawOp
	if err := rawOps(ops[:len(spec)], spec, a, dims, dt); err != nil {
		return err
	}
	return checkOverlaps(ops[:len(spec)])
}

// rawOps lists the operands spec of a call of problem d in element type dt
// into ops, from the fields of its args, each checked alone (checkOps).
func rawOps(ops []rawOp, spec []rawOperand, a rawArgs, d Dims, dt DType) error {
	if a.ts[0] == nil {
		return &DataError{Arg: "args", Reason: "nil"}
	}
	qs, kvs := d.QShape(), d.KVShape()
	bufs := 0
	for i, o := range spec {
		if o.buf {
			ops[i] = bufferOp(o.name, a.bufs[bufs], d.LSEBytes(), o.out)
			bufs++
			continue
		}
		s := qs
		if o.kv {
			s = kvs
		}
		var err error
		if ops[i], err = tensorOp(o.name, a.ts[i], s, dt, o.out); err != nil {
			return err
		}
	}
	return checkOps(ops)
}

// rawFields point at a plan's parameter block fields of its operands, in
// the order of its rawOperands: every operand's address, each tensor's B,
// N and H strides.
type rawFields struct {
	ptrs    [10]*uint64
	strides [8][3]*int64
}

// fill writes the addresses and strides of operands a where f points.
func (f *rawFields) fill(a rawArgs) {
	n := 0
	for i, t := range a.ts {
		if t == nil {
			break
		}
		*f.ptrs[i] = t.Ptr
		setStrides(t.Strides, f.strides[i][0], f.strides[i][1], f.strides[i][2])
		n++
	}
	for i, b := range a.bufs {
		if b != nil {
			*f.ptrs[n+i] = b.Ptr
		}
	}
}

// setStrides writes the B, N and H strides of st into one operand's fields.
func setStrides(st Strides, batch, row, head *int64) {
	*batch, *row, *head = int64(st[0]), int64(st[1]), int64(st[2])
}
