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
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r, err := d.newRawPlan(dims, dt, o)
	if err != nil {
		return nil, err
	}
	if f, v := r.p.modFeature(); f != "" {
		return nil, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: "raw calls run the plain kernels only (Device.Forward runs score modifiers)"}
	}
	kern, err := d.fwdKernelAs(r.p, dt)
	if err != nil {
		return nil, err
	}
	if !d.shipped(kern.mod) {
		// A rung compiled by LoadRungSource lives in a module of its own that
		// ResetRungSource unloads: a plan must not outlive it.
		return nil, &UnsupportedError{Backend: GPU, Feature: "raw plan", Value: kern.info.Symbol,
			Reason: "raw plans run the shipped kernels; ResetRungSource first (an NVRTC-compiled rung is for Forward and BenchForward)"}
	}
	var alt *loadedKernel
	if kern.v.Arch == kernels.SM90A {
		if alt, err = d.passKernel(kernels.Fwd, dims, r.p.Causal, false); err != nil { // the sm_80 path's
			return nil, err
		}
	}
	r.mod = kern.mod
	return newRawForward(r, kern, alt, d.ctas), nil
}

// newRawForward fills the parts of the plan no call changes (ctas: the
// persistent kernels' grid, Device.ctas).
func newRawForward(r rawPlan, kern, alt *loadedKernel, ctas int) *RawForward {
	f := &RawForward{rawPlan: r, kern: kern, alt: alt}
	lf := fieldsOf(r.p)
	f.cfg = fwdConfig(kern.info, lf, ctas)
	if alt != nil {
		f.h = new(kernels.Sm90FwdArgs)
		f.params = &f.h.P
		f.args = cuda.NewArgs(unsafe.Pointer(f.h))
		f.altCfg = fwdConfig(alt.info, lf, ctas)
		f.altArgs = cuda.NewArgs(unsafe.Pointer(f.params))
	} else {
		f.params = new(kernels.FwdParams)
		f.args = cuda.NewArgs(unsafe.Pointer(f.params))
	}
	lf.setFwd(f.params)
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
// and operands within the Bytes given (Bytes 0 is left to Enqueue, which
// asks the driver). Enqueue runs the same checks first.
func CheckRawForward(dims Dims, dt DType, a *RawForwardArgs) error {
	if err := checkRawDims(dims, dt); err != nil {
		return err
	}
	_, err := fwdOps(dims, dt, a)
	return err
}

// fwdOps lists a's operands, checked as CheckRawForward says.
func fwdOps(d Dims, dt DType, a *RawForwardArgs) ([5]rawOp, error) {
	var ops [5]rawOp
	if a == nil {
		return ops, &DataError{Arg: "args", Reason: "nil"}
	}
	qs, kvs := d.QShape(), d.KVShape()
	var err error
	// Names apart from pointers: in one struct, escape analysis would let
	// the caller's args escape with the names that errors keep.
	shapes := [4]Shape{qs, kvs, kvs, qs}
	for i, t := range [4]*RawTensor{&a.Q, &a.K, &a.V, &a.Out} {
		if ops[i], err = tensorOp(rawFwdNames[i], t, shapes[i], dt, i == 3); err != nil {
			return ops, err
		}
	}
	ops[4] = bufferOp("lse", &a.LSE, d.LSEBytes(), true)
	return ops, checkOps(ops[:])
}

// fill writes a's addresses and strides into the parameter block.
func (f *RawForward) fill(a *RawForwardArgs) {
	p := f.params
	p.Q, p.K, p.V, p.O, p.LSE = a.Q.Ptr, a.K.Ptr, a.V.Ptr, a.Out.Ptr, a.LSE.Ptr
	setStrides(a.Q.Strides, &p.QBatchStride, &p.QRowStride, &p.QHeadStride)
	setStrides(a.K.Strides, &p.KBatchStride, &p.KRowStride, &p.KHeadStride)
	setStrides(a.V.Strides, &p.VBatchStride, &p.VRowStride, &p.VHeadStride)
	setStrides(a.Out.Strides, &p.OBatchStride, &p.ORowStride, &p.OHeadStride)
}

// Enqueue checks a (CheckRawForward, then the driver's answers for operands with
// Bytes 0 and for the stream) and enqueues the forward kernel on stream, a
// CUstream of the device's primary context (Stream.Handle, or a handle
// from other CUDA code; 0 is the legacy default stream). It returns once
// the kernel is enqueued: Out and the LSE are written when the stream gets
// there, and a kernel fault is reported by a later synchronisation. Every
// error comes before the launch.
func (f *RawForward) Enqueue(stream uintptr, a *RawForwardArgs) error {
	if f == nil || f.d == nil || f.kern == nil {
		return errZeroPlan("RawForward")
	}
	ops, err := fwdOps(f.p.Dims, f.dt, a)
	if err != nil {
		return err
	}
	d := f.d
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if err := f.ready(stream, ops[:]); err != nil {
		return err
	}
	f.fill(a)
	kern, cfg, args := f.kern, f.cfg, f.args
	if f.h != nil {
		if err := encodeSM90A(d.tmaps, kern.v, f.h); errors.Is(err, errNoTensorMap) {
			kern, cfg, args = f.alt, f.altCfg, f.altArgs
		} else if err != nil {
			return fmt.Errorf("flashattn: %s on %s: %w", kern.info.Symbol, d.info, err)
		}
	}
	if err := kern.fn.LaunchOn(cfg, stream, args); err != nil {
		return fmt.Errorf("flashattn: launching %s on %s: %w", kern.info.Symbol, d.info, err)
	}
	return nil
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
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r, err := d.newRawPlan(dims, dt, o)
	if err != nil {
		return nil, err
	}
	// The plain three kernels only: a window, softcap or ALiBi needs the
	// _mod pair and its parameters, which Device.Backward sets up.
	if f, v := r.p.modFeature(); f != "" {
		return nil, &UnsupportedError{Backend: GPU, Feature: f, Value: v,
			Reason: "the raw backward runs the plain three kernels; Device.Backward runs the modifiers' backward"}
	}
	// The raw backward takes the caller's Di workspace and nothing else, so
	// it runs the three-kernel backward (no dQ accumulator): deterministic.
	r.p.Deterministic = true
	ks, err := d.loadPasses(threePass, r.p.Dims, r.p.Causal, dt)
	if err == nil {
		err = d.checkProblem(r.p)
	}
	if err != nil {
		return nil, err
	}
	r.mod = ks[0].mod
	return newRawBackward(r, ks), nil
}

// newRawBackward fills the parts of the plan no call changes.
func newRawBackward(r rawPlan, ks [3]*loadedKernel) *RawBackward {
	b := &RawBackward{rawPlan: r, ks: ks, params: new(kernels.BwdParams)}
	lf := fieldsOf(r.p)
	b.cfgs = bwdConfigs(ks, lf)
	lf.setBwd(b.params)
	b.args = cuda.NewArgs(unsafe.Pointer(b.params))
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
	if err := checkRawDims(dims, dt); err != nil {
		return err
	}
	_, err := bwdOps(dims, dt, a)
	return err
}

// bwdOps lists a's operands, checked as CheckRawBackward says.
func bwdOps(d Dims, dt DType, a *RawBackwardArgs) ([10]rawOp, error) {
	var ops [10]rawOp
	if a == nil {
		return ops, &DataError{Arg: "args", Reason: "nil"}
	}
	qs, kvs := d.QShape(), d.KVShape()
	var err error
	shapes := [8]Shape{qs, kvs, kvs, qs, qs, qs, kvs, kvs}
	for i, t := range [8]*RawTensor{&a.Q, &a.K, &a.V, &a.Out, &a.DOut, &a.DQ, &a.DK, &a.DV} {
		if ops[i], err = tensorOp(rawBwdNames[i], t, shapes[i], dt, i >= 5); err != nil {
			return ops, err
		}
	}
	ops[8] = bufferOp("lse", &a.LSE, d.LSEBytes(), false)
	ops[9] = bufferOp("Di", &a.Di, d.DiBytes(), true)
	return ops, checkOps(ops[:])
}

// fill writes a's addresses and strides into the parameter block.
func (b *RawBackward) fill(a *RawBackwardArgs) {
	p := b.params
	p.Q, p.K, p.V, p.O, p.DO = a.Q.Ptr, a.K.Ptr, a.V.Ptr, a.Out.Ptr, a.DOut.Ptr
	p.LSE, p.Di = a.LSE.Ptr, a.Di.Ptr
	p.DQ, p.DK, p.DV = a.DQ.Ptr, a.DK.Ptr, a.DV.Ptr
	setStrides(a.Q.Strides, &p.QBatchStride, &p.QRowStride, &p.QHeadStride)
	setStrides(a.K.Strides, &p.KBatchStride, &p.KRowStride, &p.KHeadStride)
	setStrides(a.V.Strides, &p.VBatchStride, &p.VRowStride, &p.VHeadStride)
	setStrides(a.Out.Strides, &p.OBatchStride, &p.ORowStride, &p.OHeadStride)
	setStrides(a.DOut.Strides, &p.DOBatchStride, &p.DORowStride, &p.DOHeadStride)
	setStrides(a.DQ.Strides, &p.DQBatchStride, &p.DQRowStride, &p.DQHeadStride)
	setStrides(a.DK.Strides, &p.DKBatchStride, &p.DKRowStride, &p.DKHeadStride)
	setStrides(a.DV.Strides, &p.DVBatchStride, &p.DVRowStride, &p.DVHeadStride)
}

// Enqueue is RawForward.Enqueue for the backward: it enqueues pre, dK/dV
// and dQ on stream and returns. The LSE must be the forward's for the same
// q, k, v and options (a -Inf LSE row is read as one that sees no key,
// which the raw call cannot check on the host).
func (b *RawBackward) Enqueue(stream uintptr, a *RawBackwardArgs) error {
	if b == nil || b.d == nil || b.ks[0] == nil || b.ks[1] == nil || b.ks[2] == nil {
		return errZeroPlan("RawBackward")
	}
	ops, err := bwdOps(b.p.Dims, b.dt, a)
	if err != nil {
		return err
	}
	d := b.d
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if err := b.ready(stream, ops[:]); err != nil {
		return err
	}
	b.fill(a)
	for i, k := range b.ks {
		if err := k.fn.LaunchOn(b.cfgs[i], stream, b.args); err != nil {
			return fmt.Errorf("flashattn: launching %s on %s: %w", k.info.Symbol, d.info, err)
		}
	}
	return nil
}

// The operands' names in errors, in the order ops lists them.
var (
	rawFwdNames = [...]string{"q", "k", "v", "out"}
	rawBwdNames = [...]string{"q", "k", "v", "out", "dOut", "dQ", "dK", "dV"}
)

// setStrides writes the B, N and H strides of st into one operand's fields.
func setStrides(st Strides, batch, row, head *int64) {
	*batch, *row, *head = int64(st[0]), int64(st[1]), int64(st[2])
}
