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

// infos are the KernelInfos of loaded kernels.
func infos(ks []*loadedKernel) []KernelInfo {
	out := make([]KernelInfo, len(ks))
	for i, k := range ks {
		out[i] = k.info
	}
	return out
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
// block; deterministic: and one int32 counter per query block; the Hopper
// single pass: B*Hq*Nq*(D+2) float32 with LSE and Di per row, and a
// counter per query block), and frees them before returning
// (BenchResult.ExtraBytes counts them). On an H100/H200 dense unmodified
// calls at D 64 and 128 run the Hopper backward (HopperKernelTable).
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

// bwdOp is one backward call: its plan, kernels (pre, dK/dV, dQ, or pre,
// the single pass, dQ convert), operands, parameter values, gradients, Di
// and the single pass's dQ accumulator.
type bwdOp struct {
	d           *Device
	pl          plan
	ks          []*loadedKernel
	f           launchFields
	q, k, v, dO *DeviceTensor
	fwd         *DeviceResult
	bufs        callBuffers  // dQ, dK, dV; Di = rowsum(dO * O), written by the pre kernel; the cumulative lengths and slopes
	acc         *cuda.Buffer // the single pass's fp32 dQ accumulator [and counters] (zero between calls); nil on the three-kernel path
	g           *DeviceGrads
}

// extraBytes is the device memory the call allocates beyond its operands:
// Di, and the dQ accumulator (and counters) on the single pass, or the
// cumulative lengths for packed sequences, and ALiBi's slopes.
func (op *bwdOp) extraBytes() int64 {
	return int64(op.bufs.rows.Size()) + 4*int64(op.pl.dqAccumLen) + op.bufs.uploadBytes()
}

// newBackward plans the call, loads its kernels and allocates the
// gradients (poisoned), Di and the dQ accumulator; d.mu is held.
func (d *Device) newBackward(p problem, q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor) (*bwdOp, error) {
	pl, ks, err := d.plan(planRequest{op: opBackward, p: p, dt: q.dtype})
	if err != nil {
		return nil, err
	}
	bufs, err := d.allocCall(p, q.dtype, "Di", p.QShape(), p.KVShape(), p.KVShape())
	if err != nil {
		return nil, err
	}
	op := &bwdOp{d: d, pl: pl, ks: ks, f: fieldsOf(p), q: q, k: k, v: v, dO: dOut, fwd: fwd, bufs: bufs,
		g: &DeviceGrads{Dims: p.Dims, DQ: bufs.outs[0], DK: bufs.outs[1], DV: bufs.outs[2], Kernels: infos(ks)}}
	if n := pl.dqAccumLen; n > 0 {
		if op.acc, err = d.ctx.Alloc(4 * n); err != nil {
			return nil, errors.Join(fmt.Errorf("flashattn: allocating the dQ accumulator on %s: %w", d.info, err), op.free())
		}
		// The sm_80 ordered pass's counters start zero (and stay so); pre
		// zeroes the rest. The Hopper pre kernel writes all of its scratch.
		if !op.hopper() {
			if err := op.acc.Memset32(0, n); err != nil {
				return nil, errors.Join(err, op.free())
			}
		}
	}
	return op, nil
}

func (op *bwdOp) kernels() []KernelInfo { return op.g.Kernels }

// free releases the gradients, Di and the dQ accumulator.
func (op *bwdOp) free() error { return errors.Join(op.bufs.free(), freeBuffers(op.acc)) }

// freeScratch releases Di, the dQ accumulator, the cumulative lengths and
// the ALiBi slopes (not the gradients).
func (op *bwdOp) freeScratch() error {
	return errors.Join(freeBuffers(op.bufs.rows, op.acc), op.bufs.freeUploads())
}

// enqueue fills the backward parameter block and launches the three kernels
// on the device's stream (the launch contract of internal/kernels).
func (op *bwdOp) enqueue() error {
	d, f := op.d, op.f
	p, args := d.bparams, d.bargs
	if op.hopper() {
		p, args = &d.hbparams.P, d.hbargs
	}
	p.Q, p.K, p.V, p.O, p.DO = op.q.buf.Ptr(), op.k.buf.Ptr(), op.v.buf.Ptr(), op.fwd.Out.buf.Ptr(), op.dO.buf.Ptr()
	p.LSE, p.Di = op.fwd.lse.Ptr(), op.bufs.rows.Ptr()
	p.DQAccum, p.DQAccumRows = 0, 0
	if op.acc != nil {
		p.DQAccum, p.DQAccumRows = op.acc.Ptr(), int32(op.pl.dqAccumRows)
	}
	p.DQ, p.DK, p.DV = op.g.DQ.buf.Ptr(), op.g.DK.buf.Ptr(), op.g.DV.buf.Ptr()
	p.CuSeqlensQ, p.CuSeqlensK = cuPtrs(op.bufs.cu, op.bufs.seqs)
	p.ALiBi = slopesPtr(op.bufs.slopes)
	set3(f.qs, &p.QBatchStride, &p.QRowStride, &p.QHeadStride)
	set3(f.qs, &p.OBatchStride, &p.ORowStride, &p.OHeadStride)
	set3(f.qs, &p.DOBatchStride, &p.DORowStride, &p.DOHeadStride)
	set3(f.qs, &p.DQBatchStride, &p.DQRowStride, &p.DQHeadStride)
	set3(f.kvs, &p.KBatchStride, &p.KRowStride, &p.KHeadStride)
	set3(f.kvs, &p.VBatchStride, &p.VRowStride, &p.VHeadStride)
	set3(f.kvs, &p.DKBatchStride, &p.DKRowStride, &p.DKHeadStride)
	set3(f.kvs, &p.DVBatchStride, &p.DVRowStride, &p.DVHeadStride)
	f.setBwd(p)
	if op.hopper() {
		d.hbparams.DetSpread = 0
		if op.pl.detSpread {
			d.hbparams.DetSpread = 1
		}
		d.hbparams.CausalGroups = int32(op.pl.causalGroups)
		if err := encodeSM90ABwd(d.tmaps, op.pl.kernels[1], d.hbparams); err != nil {
			return fmt.Errorf("flashattn: %s on %s: %w", op.pl.kernels[1].Symbol, d.info, err)
		}
	}
	for i, k := range op.ks {
		if err := k.fn.Launch(op.pl.cfgs[i], d.stream, args); err != nil {
			return fmt.Errorf("flashattn: launching %s on %s: %w", k.info.Symbol, d.info, err)
		}
	}
	return nil
}

// hopper says whether the call runs the Hopper backward (Sm90BwdArgs).
func (op *bwdOp) hopper() bool { return op.pl.kernels[1].Arch == kernels.SM90A }

func (op *bwdOp) relaunch() error {
	args := op.d.bargs
	if op.hopper() {
		args = op.d.hbargs
	}
	for i, k := range op.ks {
		if err := k.fn.LaunchBound(op.pl.cfgs[i], op.d.stream.Handle(), args); err != nil {
			return err
		}
	}
	return nil
}
