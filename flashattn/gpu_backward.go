package flashattn

import (
	"errors"
	"fmt"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// DeviceGrads is the output of Device.Backward: the gradients on the device,
// dense BSHD, of the inputs' dtype (fp16, or bf16).
type DeviceGrads struct {
	Dims    Dims
	DQ      *DeviceTensor // (B, Nq, Hq, D)
	DK, DV  *DeviceTensor // (B, Nk, Hkv, D)
	Kernels []KernelInfo  // the kernels that ran, in launch order: pre (Di), dK/dV, dQ (or dK/dV/dQ, dQ convert)
}

// Free releases dQ, dK and dV (nil for a nil *DeviceGrads).
func (g *DeviceGrads) Free() error {
	if g == nil {
		return nil
	}
	return errors.Join(g.DQ.Free(), g.DK.Free(), g.DV.Free())
}

// UploadResultAs copies a forward result computed elsewhere (on the CPU,
// or read from disk) to the device for Backward: out is (B, Nq, Hq, D) and
// is rounded to element type dt (nearest even; values dt cannot hold are a
// *DataError), the dtype of the Backward's other tensors; lse is (B, Hq,
// Nq), natural log, -Inf for rows that see no key.
func (d *Device) UploadResultAs(dims Dims, out *Tensor, lse []float32, dt DType) (*DeviceResult, error) {
	if dt.Size() == 0 {
		return nil, checkDType(dt, 0)
	}
	return d.uploadResultAs(dims, out, lse, dt)
}

// uploadResultAs is UploadResultAs without the dtype's check.
func (d *Device) uploadResultAs(dims Dims, out *Tensor, lse []float32, dt DType) (*DeviceResult, error) {
	if err := dims.Validate(); err != nil {
		return nil, err
	}
	if err := out.check("out"); err != nil {
		return nil, err
	}
	if err := expectShape("out", out.Shape, dims.QShape()); err != nil {
		return nil, err
	}
	lastNoKey, err := dims.checkLSE(lse)
	if err != nil {
		return nil, err
	}
	r, err := d.uploadResult(dims, out, lse, dt)
	if err != nil {
		return nil, err
	}
	r.lastNoKey = lastNoKey
	return r, nil
}

// uploadResult is uploadResultAs for a checked out and lse.
func (d *Device) uploadResult(dims Dims, out *Tensor, lse []float32, dt DType) (*DeviceResult, error) {
	o, err := d.uploadAs("out", out, dt)
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, errors.Join(err, o.Free())
	}
	defer d.mu.Unlock()
	buf, err := d.ctx.Alloc(4 * dims.LSELen())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("flashattn: allocating the LSE on %s: %w", d.info, err), o.Free())
	}
	if err := cuda.CopyToDevice(buf, lse); err != nil {
		return nil, errors.Join(err, buf.Free(), o.Free())
	}
	return &DeviceResult{Dims: dims, Out: o, lse: buf, lastNoKey: -1}, nil
}

// The kernels of the backward paths, in launch order.
var (
	singlePass    = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDVQ, kernels.BwdDQConv}
	singlePassDet = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDVQDet, kernels.BwdDQConv}
	threePass     = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDV, kernels.BwdDQ}
	varlenPasses  = [3]kernels.Pass{kernels.BwdPreVarlen, kernels.BwdDKDVVarlen, kernels.BwdDQVarlen}
	modPasses     = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDVMod, kernels.BwdDQMod}
	// Packed sequences with modifiers: the varlen pre, then the modified
	// pair, which takes the cumulative lengths at run time (kernels/varlen.cuh).
	varlenModPasses = [3]kernels.Pass{kernels.BwdPreVarlen, kernels.BwdDKDVMod, kernels.BwdDQMod}
	// A head dim whose only backward is the single pass (D 256): its modified
	// twin (atomic dQ), or with Options.Deterministic the ordered one.
	singlePassMod    = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDVQMod, kernels.BwdDQConv}
	singlePassDetMod = [3]kernels.Pass{kernels.BwdPre, kernels.BwdDKDVQDetMod, kernels.BwdDQConv}
	// There, packed sequences (modifiers or not) run the modified single pass
	// after the varlen pre, or its ordered twin.
	singlePassModVarlen    = [3]kernels.Pass{kernels.BwdPreVarlen, kernels.BwdDKDVQMod, kernels.BwdDQConv}
	singlePassDetModVarlen = [3]kernels.Pass{kernels.BwdPreVarlen, kernels.BwdDKDVQDetMod, kernels.BwdDQConv}
)

// loadBwd loads the backward kernels for dims in element type dt: the
// single pass (deterministic: its ordered twin, which large rows have) where
// the device has one for dims and dt, else the three-kernel backward; d.mu is held.
func (d *Device) loadBwd(dims Dims, causal, deterministic bool, dt DType) ([3]*loadedKernel, error) {
	passes, fused := singlePass, kernels.BwdDKDVQ
	if deterministic {
		passes, fused = singlePassDet, kernels.BwdDKDVQDet
	}
	// A heads-fastest grid's y is the key blocks (at most maxGridY).
	v, ok := d.lookup(fused, dt == BF16, dims.D, causal)
	tooLong := ok && kernels.HeadsFastest(v) && (dims.Nk+v.Bc-1)/v.Bc > d.maxGridY
	if !ok || tooLong {
		passes = threePass
	}
	if _, three := d.lookup(kernels.BwdDKDV, dt == BF16, dims.D, causal); !three {
		switch {
		case tooLong: // the head dim's only backward is that pass (D 256)
			return [3]*loadedKernel{}, &UnsupportedError{Backend: GPU, Feature: "deterministic", Value: "true",
				Reason: fmt.Sprintf("the ordered single pass's grid takes at most %d key blocks of %d (Nk %d)", d.maxGridY, v.Bc, dims.Nk)}
		case !ok && deterministic:
			return [3]*loadedKernel{}, d.noOrderedPass(dims.D, dt)
		}
	}
	return d.loadPasses(passes, dims, causal, dt)
}

// noOrderedPass is the error for Options.Deterministic at a head dim whose
// only backward is the single pass (D 256) where no ordered twin of it fits
// the device's shared memory (every sm_80+ part has one; the check keeps a
// table without it from reaching the three kernels it lacks); d.mu is held.
func (d *Device) noOrderedPass(headDim int, dt DType) error {
	return &UnsupportedError{Backend: GPU, Feature: "deterministic", Value: "true",
		Reason: fmt.Sprintf("head dim %d has no ordered single pass within %s's %d bytes of shared memory per block", headDim, d.info, d.smemOptin)}
}

// loadPasses loads the kernels of passes for dims in element type dt; d.mu is held.
func (d *Device) loadPasses(passes [3]kernels.Pass, dims Dims, causal bool, dt DType) ([3]*loadedKernel, error) {
	var ks [3]*loadedKernel
	for i, pass := range passes {
		k, err := d.kernelAs(pass, dims, causal, dt)
		if err != nil {
			return ks, err
		}
		ks[i] = k
	}
	return ks, nil
}

// bwdKernels is loadBwd for p, a problem the device can run
// (checkProblem), or for packed sequences the varlen three (deterministic
// already), or with a window, softcap or ALiBi the modified three (pre, then
// BwdDKDVMod and BwdDQMod: deterministic, and even where the plain call
// runs the single pass: it has no modifiers, and one kernel pair with
// run-time flags is all the fatbin carries for them; causal is the window's
// right edge, so the variant is the non-causal one), packed: after the
// varlen pre. A head dim without that pair and the varlen three (D 256: the
// single pass alone) runs the modified single pass instead (atomic dQ) for
// both, packed sequences after the varlen pre; with Options.Deterministic
// its ordered twin (packed sequences too); d.mu is held.
func (d *Device) bwdKernels(p problem, dt DType) ([3]*loadedKernel, error) {
	var ks [3]*loadedKernel
	var err error
	_, pair := d.lookup(kernels.BwdDKDVMod, dt == BF16, p.D, false)
	_, fusedMod := d.lookup(kernels.BwdDKDVQMod, dt == BF16, p.D, false)
	switch {
	case p.mods() && d.rung != 0:
		f, v := p.modFeature()
		return ks, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: fmt.Sprintf("the kernel ladder's rung %d has no score modifiers", d.rung)}
	case (p.mods() || p.varlen != nil) && !pair && fusedMod:
		passes, nk := singlePassMod, p.Nk
		switch {
		case p.varlen != nil && p.Deterministic:
			passes, nk = singlePassDetModVarlen, maxSeqlen(p.varlen.CuSeqlensK)
		case p.varlen != nil:
			passes = singlePassModVarlen
		case p.Deterministic:
			passes = singlePassDetMod
		}
		if p.Deterministic {
			v, ok := d.lookup(passes[1], dt == BF16, p.D, false)
			if !ok {
				return ks, d.noOrderedPass(p.D, dt)
			}
			if (nk+v.Bc-1)/v.Bc > d.maxGridY {
				return ks, &UnsupportedError{Backend: GPU, Feature: "deterministic", Value: "true",
					Reason: fmt.Sprintf("the ordered single pass's grid takes at most %d key blocks of %d (Nk %d)", d.maxGridY, v.Bc, nk)}
			}
		}
		ks, err = d.loadPasses(passes, p.Dims, false, dt)
	case p.mods():
		passes := modPasses
		if p.varlen != nil {
			passes = varlenModPasses
		}
		ks, err = d.loadPasses(passes, p.Dims, false, dt)
	case p.varlen != nil:
		ks, err = d.loadPasses(varlenPasses, p.Dims, p.Causal, dt)
	default:
		ks, err = d.loadBwd(p.Dims, p.Causal, p.Deterministic, dt)
	}
	if err != nil {
		return ks, err
	}
	return ks, d.checkProblem(p)
}

// Backward runs the FA2 backward pass on the device: q, k, v are the inputs
// of the forward call, fwd its result (O and the LSE; see also UploadResultAs)
// and dOut the gradient of O, (B, Nq, Hq, D), all fp16 or all bf16
// (UploadAs, UploadResultAs; bf16 on the sm_80 path only: mixed dtypes are a
// *DataError, bf16 on the sm_75 path an *UnsupportedError). It returns dQ,
// dK and dV (of that dtype, fp32 accumulation) and waits for the kernels,
// so a kernel fault is reported here. The options used are Causal and
// Scale, which must be those of the forward call, and Deterministic, which
// picks the path (Kernels(OpBackward, ...)): the single pass's dQ, summed with
// atomics, may differ in its last bits between calls; with Deterministic
// every output is bit-reproducible. Beyond its outputs the call allocates Di =
// rowsum(dO*O), B*Hq*Nq float32, and on the single pass its dQ
// accumulator, B*Hq*Nq*D float32 (Nq rounded up to the kernel's query
// block; deterministic: and one int32 counter per query block), and frees
// them before returning (BenchResult.ExtraBytes counts them).
func (d *Device) Backward(q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor, o *Options) (*DeviceGrads, error) {
	p, err := d.backwardProblem(q, k, v, fwd, dOut, o)
	if err != nil {
		return nil, err
	}
	if err := p.checkNoKeyRows(fwd.lastNoKey); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.backward(p, q, k, v, fwd, dOut)
}

// backwardProblem checks the operands of a backward call on the device
// (Backward, BackwardVarlen) and returns their problem, o resolved.
func (d *Device) backwardProblem(q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor, o *Options) (problem, error) {
	o = o.withoutTrace() // a backward call ignores it (BackwardContext)
	if fwd == nil {
		return problem{}, &DataError{Arg: "fwd", Reason: "forward result is nil"}
	}
	p, err := d.problemOf(o, q, k, v, fwd.Out, dOut)
	if err != nil {
		return problem{}, err
	}
	if fwd.lse == nil || fwd.lse.Freed() {
		return problem{}, fmt.Errorf("lse: %w", ErrFreed)
	}
	if err := expectShape("out", fwd.Out.shape, p.QShape()); err != nil {
		return problem{}, err
	}
	if err := expectShape("dOut", dOut.shape, p.QShape()); err != nil {
		return problem{}, err
	}
	if fwd.Dims != p.Dims || fwd.lse.Size() < 4*p.LSELen() {
		return problem{}, &DataError{Arg: "fwd", Reason: fmt.Sprintf("result of a problem %+v, not %+v", fwd.Dims, p.Dims)}
	}
	return p, nil
}

// backward runs one backward call and waits for it; Di is freed on return,
// the gradients on failure; d.mu is held.
func (d *Device) backward(p problem, q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor) (*DeviceGrads, error) {
	op, err := d.newBackward(p, q, k, v, fwd, dOut)
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.freeScratch() }()
	if err := d.run(op); err != nil {
		return nil, errors.Join(err, op.free())
	}
	return op.g, nil
}

// bwdOp is one backward call: its kernels (pre, dK/dV, dQ, or pre, the
// single pass, dQ convert), operands, parameter values, gradients, Di and
// the single pass's dQ accumulator.
type bwdOp struct {
	d           *Device
	ks          [3]*loadedKernel
	f           launchFields
	q, k, v, dO *DeviceTensor
	fwd         *DeviceResult
	di          *cuda.Buffer // Di = rowsum(dO * O), written by the pre kernel
	acc         *cuda.Buffer // the single pass's fp32 dQ accumulator [and counters] (zero between calls); nil on the three-kernel path
	cu          *cuda.Buffer // varlen: the cumulative lengths (varlenCuLens), or nil
	slopes      *cuda.Buffer // ALiBi's slopes (float32, Hq), or nil
	seqs        int          // varlen: the number of sequences
	g           *DeviceGrads
}

// dqAccum is the 4-byte length of the dQ accumulator (and the ordered
// twin's counters) the call's kernels need, and its rows per slab
// (BwdParams.DQAccumRows): 0, 0 unless they are the single pass (its fused
// kernel's tile, Large or not, sets the accumulator's query blocks; on packed
// sequences Nq is their total).
func (op *bwdOp) dqAccum() (length, rows int) {
	v, dims := op.ks[1].v, op.g.Dims
	switch {
	case !v.Pass.Fused():
		return 0, 0
	case op.cu != nil:
		return kernels.DQAccumLenPacked(v, op.seqs, dims.Nq, dims.Hq), kernels.DQAccumRowsPacked(op.seqs, dims.Nq)
	}
	return kernels.DQAccumLen(v, dims.B, dims.Nq, dims.Hq), kernels.DQAccumRows(v, dims.Nq)
}

// extraBytes is the device memory the call allocates beyond its operands:
// Di, and the dQ accumulator (and counters) on the single pass, or the
// cumulative lengths for packed sequences, and ALiBi's slopes.
func (op *bwdOp) extraBytes() int64 {
	acc, _ := op.dqAccum()
	n := int64(op.di.Size()) + 4*int64(acc)
	for _, b := range []*cuda.Buffer{op.cu, op.slopes} {
		if b != nil {
			n += int64(b.Size())
		}
	}
	return n
}

// newBackward finds the kernels, checks the grid and allocates the
// gradients (poisoned) and Di; d.mu is held.
func (d *Device) newBackward(p problem, q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor) (*bwdOp, error) {
	ks, err := d.bwdKernels(p, q.dtype)
	if err != nil {
		return nil, err
	}
	op := &bwdOp{d: d, ks: ks, f: fieldsOf(p), q: q, k: k, v: v, dO: dOut, fwd: fwd,
		g: &DeviceGrads{Dims: p.Dims, Kernels: []KernelInfo{ks[0].info, ks[1].info, ks[2].info}}}
	for _, x := range []struct {
		dst **DeviceTensor
		s   Shape
	}{{&op.g.DQ, p.QShape()}, {&op.g.DK, p.KVShape()}, {&op.g.DV, p.KVShape()}} {
		t, err := d.allocAs(x.s, q.dtype)
		if err != nil {
			return nil, errors.Join(err, op.free())
		}
		*x.dst = t
		if err := t.buf.Memset32(poisonOf(q.dtype), t.buf.Size()/4); err != nil {
			return nil, errors.Join(err, op.free())
		}
	}
	if op.di, err = d.ctx.Alloc(4 * p.LSELen()); err != nil {
		return nil, errors.Join(fmt.Errorf("flashattn: allocating Di on %s: %w", d.info, err), op.free())
	}
	if err := op.di.Memset32(nanF32, p.LSELen()); err != nil {
		return nil, errors.Join(err, op.free())
	}
	if p.varlen != nil {
		op.seqs = p.varlen.Seqs()
		if op.cu, err = d.uploadVarlen(*p.varlen, p.Dims, &op.f); err != nil {
			return nil, errors.Join(err, op.free())
		}
	}
	if op.slopes, err = d.uploadSlopes(p); err != nil {
		return nil, errors.Join(err, op.free())
	}
	if n, _ := op.dqAccum(); n > 0 {
		if op.acc, err = d.ctx.Alloc(4 * n); err != nil {
			return nil, errors.Join(fmt.Errorf("flashattn: allocating the dQ accumulator on %s: %w", d.info, err), op.free())
		}
		if err := op.acc.Memset32(0, n); err != nil { // the ordered pass's counters start zero (and stay so); pre zeroes the rest
			return nil, errors.Join(err, op.free())
		}
	}
	return op, nil
}

func (op *bwdOp) kernels() []KernelInfo { return op.g.Kernels }

// free releases the gradients, Di and the dQ accumulator.
func (op *bwdOp) free() error {
	var err error
	for _, t := range []*DeviceTensor{op.g.DQ, op.g.DK, op.g.DV} {
		err = errors.Join(err, t.Free())
	}
	return errors.Join(err, op.freeScratch())
}

// freeScratch releases Di, the dQ accumulator, the cumulative lengths and
// the ALiBi slopes (not the gradients).
func (op *bwdOp) freeScratch() error {
	var err error
	for _, b := range []*cuda.Buffer{op.di, op.acc, op.cu, op.slopes} {
		if b != nil && !b.Freed() {
			err = errors.Join(err, b.Free())
		}
	}
	return err
}

// enqueue fills the backward parameter block and launches the three kernels
// on the device's stream (the launch contract of internal/kernels).
func (op *bwdOp) enqueue() error {
	d, f := op.d, op.f
	p := d.bparams
	p.Q, p.K, p.V, p.O, p.DO = op.q.buf.Ptr(), op.k.buf.Ptr(), op.v.buf.Ptr(), op.fwd.Out.buf.Ptr(), op.dO.buf.Ptr()
	p.LSE, p.Di = op.fwd.lse.Ptr(), op.di.Ptr()
	p.DQAccum, p.DQAccumRows = 0, 0
	if op.acc != nil {
		_, rows := op.dqAccum()
		p.DQAccum, p.DQAccumRows = op.acc.Ptr(), int32(rows)
	}
	p.DQ, p.DK, p.DV = op.g.DQ.buf.Ptr(), op.g.DK.buf.Ptr(), op.g.DV.buf.Ptr()
	p.CuSeqlensQ, p.CuSeqlensK = cuPtrs(op.cu, op.seqs)
	p.ALiBi = slopesPtr(op.slopes)
	set3(f.qs, &p.QBatchStride, &p.QRowStride, &p.QHeadStride)
	set3(f.qs, &p.OBatchStride, &p.ORowStride, &p.OHeadStride)
	set3(f.qs, &p.DOBatchStride, &p.DORowStride, &p.DOHeadStride)
	set3(f.qs, &p.DQBatchStride, &p.DQRowStride, &p.DQHeadStride)
	set3(f.kvs, &p.KBatchStride, &p.KRowStride, &p.KHeadStride)
	set3(f.kvs, &p.VBatchStride, &p.VRowStride, &p.VHeadStride)
	set3(f.kvs, &p.DKBatchStride, &p.DKRowStride, &p.DKHeadStride)
	set3(f.kvs, &p.DVBatchStride, &p.DVRowStride, &p.DVHeadStride)
	f.setBwd(p)
	cfgs := bwdConfigs(op.ks, f)
	for i, k := range op.ks {
		if err := k.fn.Launch(cfgs[i], d.stream, d.bargs); err != nil {
			return fmt.Errorf("flashattn: launching %s on %s: %w", k.info.Symbol, d.info, err)
		}
	}
	return nil
}

func (op *bwdOp) relaunch() error {
	cfgs := bwdConfigs(op.ks, op.f)
	for i, k := range op.ks {
		if err := k.fn.LaunchBound(cfgs[i], op.d.stream.Handle(), op.d.bargs); err != nil {
			return err
		}
	}
	return nil
}
