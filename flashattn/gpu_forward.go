package flashattn

import (
	"errors"
	"fmt"
	"math"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// Forward runs the FA2 forward kernel on device tensors q (B, Nq, Hq, D) and
// k, v (B, Nk, Hkv, D) and returns O and the LSE on the device. It waits for
// the kernel, so a kernel fault is reported here. The options used are
// Causal, Scale, Window, Softcap and ALiBi (the last three run a modified
// kernel, KernelInfo.Pass "fwd_mod" plus "_cap"/"_alibi" for those compiled
// in; ALiBi's slopes go up per call); the call costs one extra device buffer, the LSE (B*Hq*Nq
// float32). q, k and v are all fp16 (Upload) or all bf16 (UploadBF16; the
// sm_80 path only), and O has their dtype.
func (d *Device) Forward(q, k, v *DeviceTensor, o *Options) (*DeviceResult, error) {
	p, err := d.problemOf(o, q, k, v)
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.forward(p, q, k, v)
}

// problemOf checks that q, k, v (and for Backward out and dOut, in that
// order) are usable on d and of one dtype, and returns the problem q, k and
// v describe, with o resolved.
func (d *Device) problemOf(o *Options, ts ...*DeviceTensor) (problem, error) {
	if d == nil {
		return problem{}, ErrDeviceClosed
	}
	if err := noTrace(o, "a GPU call"); err != nil {
		return problem{}, err
	}
	for i, t := range ts {
		if err := t.usable(argNames[i], d); err != nil {
			return problem{}, err
		}
		if t.dtype != ts[0].dtype {
			return problem{}, &DataError{Arg: argNames[i], Reason: fmt.Sprintf("is %v, q is %v: mixed dtypes are not converted", t.dtype, ts[0].dtype)}
		}
	}
	dims, err := dimsOf(ts[0].shape, ts[1].shape, ts[2].shape)
	if err != nil {
		return problem{}, err
	}
	return o.resolve(dims)
}

// ForwardHost is Forward for host tensors, as flashattn.Forward with the
// GPU backend runs it, but on this device (with its kernel path, see
// ForcePath): upload (fp16), Forward, download. All device memory is freed
// on return; Result.Reason names the device and the kernel.
func (d *Device) ForwardHost(q, k, v *Tensor, o *Options) (*Result, error) {
	if err := noTrace(o, "a GPU call"); err != nil {
		return nil, err
	}
	p, err := checkForward(q, k, v, o)
	if err != nil {
		return nil, err
	}
	if err := reserveCall(GPU, gpuImpl{d}, p, o, false); err != nil {
		return nil, err
	}
	out, lse := newOutput(p.QShape()), newBuffer(p.LSELen())
	kern, err := d.forwardHost(p, q, k, v, out, lse)
	if err != nil {
		return nil, err
	}
	return &Result{Dims: p.Dims, Out: out, LSE: lse, Backend: GPU, Reason: d.reason(kern)}, nil
}

// forwardHost uploads q, k and v, runs the forward pass and downloads O and
// the LSE into out and lse.
func (d *Device) forwardHost(p problem, q, k, v, out *Tensor, lse []float32) (kern KernelInfo, err error) {
	in, err := d.uploadAll(argNames[:3], q, k, v)
	defer func() { err = errors.Join(err, freeAll(in)) }()
	if err != nil {
		return KernelInfo{}, err
	}
	if err := d.lock(); err != nil {
		return KernelInfo{}, err
	}
	r, err := d.forward(p, in[0], in[1], in[2])
	d.mu.Unlock()
	if err != nil {
		return KernelInfo{}, err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	if err := r.Out.downloadInto(out.Data); err != nil {
		return KernelInfo{}, err
	}
	if err := r.lseInto(lse); err != nil {
		return KernelInfo{}, err
	}
	return r.Kernel, nil
}

// forward runs one forward call and waits for it; d.mu is held.
func (d *Device) forward(p problem, q, k, v *DeviceTensor) (*DeviceResult, error) {
	op, err := d.newForward(p, q, k, v)
	if err != nil {
		return nil, err
	}
	if err := d.run(op); err != nil {
		return nil, errors.Join(err, op.free())
	}
	if err := op.freeScratch(); err != nil {
		return nil, errors.Join(err, op.res.Free())
	}
	return op.res, nil
}

// deviceOp is one call prepared on a device, its outputs allocated:
// enqueue launches its kernels on the device's stream (Forward and Backward
// once, the benchmarks many times); d.mu is held for every method.
type deviceOp interface {
	enqueue() error
	// relaunch enqueues the kernels of the last enqueue again with the
	// parameter blocks as that left them, by bare cuLaunchKernel calls
	// (cuda.Function.LaunchBound; the context bound by the caller): the
	// driver's own cost, which the benchmarks subtract from enqueue's.
	relaunch() error
	kernels() []KernelInfo // in launch order
	free() error           // the outputs and scratch the op allocated
}

// run enqueues op and waits for it, so that a kernel fault is reported here;
// d.mu is held.
func (d *Device) run(op deviceOp) error {
	if err := op.enqueue(); err != nil {
		return err
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("flashattn: %s on %s: %w", opName(op), d.info, err)
	}
	return nil
}

// opName names an op's kernels in errors.
func opName(op deviceOp) string {
	ks := op.kernels()
	if len(ks) == 1 {
		return "kernel " + ks[0].Symbol
	}
	s := "backward kernels "
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += k.Symbol
	}
	return s
}

// fwdOp is one forward call: its kernel, operands and parameter values.
type fwdOp struct {
	d       *Device
	kern    *loadedKernel
	f       launchFields
	q, k, v *DeviceTensor
	res     *DeviceResult
	slopes  *cuda.Buffer // ALiBi's slopes (float32, Hq), or nil
	cu      *cuda.Buffer // varlen: the cumulative lengths (varlenCuLens), or nil
	seqs    int          // varlen: the number of sequences
}

// newForward finds the kernel, checks the grid and allocates O and the LSE,
// poisoned; d.mu is held.
func (d *Device) newForward(p problem, q, k, v *DeviceTensor) (*fwdOp, error) {
	kern, err := d.fwdKernelAs(p, q.dtype)
	if err != nil {
		return nil, err
	}
	out, err := d.allocAs(p.QShape(), q.dtype)
	if err != nil {
		return nil, err
	}
	lse, err := d.ctx.Alloc(p.LSEBytes())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("flashattn: allocating the LSE on %s: %w", d.info, err), out.buf.Free())
	}
	op := &fwdOp{d: d, kern: kern, f: fieldsOf(p), q: q, k: k, v: v,
		res: &DeviceResult{Dims: p.Dims, Out: out, Kernel: kern.info, lse: lse, lastNoKey: -1}}
	if err := out.buf.Memset32(poisonOf(q.dtype), out.buf.Size()/4); err != nil {
		return nil, errors.Join(err, op.free())
	}
	if err := lse.Memset32(nanF32, p.LSELen()); err != nil {
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
	return op, nil
}

// uploadSlopes copies p's ALiBi slopes (float32, Hq) to the device for the
// modified kernels, or returns nil without ALiBi.
func (d *Device) uploadSlopes(p problem) (*cuda.Buffer, error) {
	if p.ALiBi == nil {
		return nil, nil
	}
	slopes := make([]float32, len(p.ALiBi))
	for h, s := range p.ALiBi {
		slopes[h] = float32(s)
	}
	buf, err := d.ctx.Alloc(4 * len(slopes))
	if err != nil {
		return nil, fmt.Errorf("flashattn: allocating the ALiBi slopes on %s: %w", d.info, err)
	}
	if err := cuda.CopyToDevice(buf, slopes); err != nil {
		return nil, errors.Join(err, buf.Free())
	}
	return buf, nil
}

// slopesPtr is the device pointer of the ALiBi slopes, 0 for none.
func slopesPtr(b *cuda.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return b.Ptr()
}

// fwdKernel is the fp16 forward kernel for p, a problem the device can run
// (checkProblem); d.mu is held.
func (d *Device) fwdKernel(p problem) (*loadedKernel, error) { return d.fwdKernelAs(p, FP16) }

// fwdKernelAs is fwdKernel for element type dt: the plain kernel (on an
// H100/H200, fp16 at the Hopper forward's head dims: that one, unless
// ForcePath), or with a
// window, softcap or ALiBi the modified one with exactly p's softcap and
// ALiBi compiled in (kernels.ModPass; the window, and causal as its right
// edge 0, are parameters), for packed sequences the FwdVarlen one (with
// modifiers the modified one, which takes the cumulative lengths at run
// time); d.mu is held.
func (d *Device) fwdKernelAs(p problem, dt DType) (*loadedKernel, error) {
	pass, causal := kernels.Fwd, p.Causal
	if p.varlen != nil {
		if d.rung != 0 {
			return nil, &UnsupportedError{Backend: GPU, Feature: varlenEntry, Value: fmt.Sprintf("rung %d", d.rung),
				Reason: "the kernel ladder has no varlen kernels"}
		}
		pass = kernels.FwdVarlen
	}
	if p.mods() {
		if d.rung != 0 {
			f, v := p.modFeature()
			return nil, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: fmt.Sprintf("the kernel ladder's rung %d has no score modifiers", d.rung)}
		}
		pass, causal = kernels.ModPass(p.Softcap > 0, p.ALiBi != nil), false
	}
	if p.varlen == nil && dt == FP16 {
		if kern, ok, err := d.sm90aKernel(pass, p.Dims, causal); ok || err != nil {
			if err != nil {
				return nil, err
			}
			return kern, d.checkProblem(p)
		}
	}
	kern, err := d.kernelAs(pass, p.Dims, causal, dt)
	if err != nil {
		return nil, err
	}
	return kern, d.checkProblem(p)
}

func (op *fwdOp) kernels() []KernelInfo { return []KernelInfo{op.kern.info} }
func (op *fwdOp) free() error           { return errors.Join(op.res.Free(), op.freeScratch()) }

// freeScratch frees the ALiBi slopes and the varlen lengths, which no caller
// sees.
func (op *fwdOp) freeScratch() error {
	var err error
	for _, b := range []*cuda.Buffer{op.slopes, op.cu} {
		if b != nil && !b.Freed() {
			err = errors.Join(err, b.Free())
		}
	}
	return err
}

// enqueue fills the pinned parameter block and launches the kernel on the
// device's stream (the launch contract of internal/kernels).
func (op *fwdOp) enqueue() error {
	d, f, ki := op.d, op.f, op.kern.info
	p, args := d.params, d.args
	if op.kern.v.Arch == kernels.SM90A {
		p, args = &d.hparams.P, d.hargs
	}
	p.Q, p.K, p.V, p.O, p.LSE = op.q.buf.Ptr(), op.k.buf.Ptr(), op.v.buf.Ptr(), op.res.Out.buf.Ptr(), op.res.lse.Ptr()
	set3(f.qs, &p.QBatchStride, &p.QRowStride, &p.QHeadStride)
	set3(f.kvs, &p.KBatchStride, &p.KRowStride, &p.KHeadStride)
	set3(f.kvs, &p.VBatchStride, &p.VRowStride, &p.VHeadStride)
	set3(f.qs, &p.OBatchStride, &p.ORowStride, &p.OHeadStride)
	f.setFwd(p)
	p.ALiBi = slopesPtr(op.slopes)
	p.CuSeqlensQ, p.CuSeqlensK = cuPtrs(op.cu, op.seqs)
	if op.kern.v.Arch == kernels.SM90A {
		if err := encodeSM90A(d.tmaps, op.kern.v, d.hparams); err != nil {
			return fmt.Errorf("flashattn: %s on %s: %w", ki.Symbol, d.info, err)
		}
	}
	return op.kern.fn.Launch(fwdConfig(ki, f, d.ctas), d.stream, args)
}

func (op *fwdOp) relaunch() error {
	args := op.d.args
	if op.kern.v.Arch == kernels.SM90A {
		args = op.d.hargs
	}
	return op.kern.fn.LaunchBound(fwdConfig(op.kern.info, op.f, op.d.ctas), op.d.stream.Handle(), args)
}

// sm90aKernel is the Hopper forward of pass (Fwd or a modified one) for
// dims (fp16, dense), loaded, where the device runs it (Device.sm90a, not a
// ladder rung); ok is false elsewhere, for passes and head dims it lacks,
// and for causal calls short enough that the sm_80 kernel is faster
// (Variant.SM80CausalMaxNk); d.mu is held.
func (d *Device) sm90aKernel(pass kernels.Pass, dims Dims, causal bool) (kern *loadedKernel, ok bool, err error) {
	if !d.sm90a || d.rung != 0 || d.nvrtcReplacesHopper(pass) {
		return nil, false, nil
	}
	v, ok := kernels.LookupSM90A(pass, dims.D, causal)
	if !ok || dims.Nk <= v.SM80CausalMaxNk {
		return nil, false, nil
	}
	if d.mods[kernels.ImageSM90A] == nil {
		if _, err := d.module(v); err != nil {
			// A driver that cannot load sm_90a code: the sm_80 path runs
			// every call from now on, and results say why (reason).
			d.sm90a, d.sm90aErr = false, err
			return nil, false, nil
		}
	}
	kern, err = d.load(v)
	return kern, err == nil, err
}

// errNoTensorMap is the error of a Hopper launch whose operands TMA cannot
// address (kernels.SM90AMaps); the callers' strides are checked before, so
// it means a stride of 2^40 bytes or more.
var errNoTensorMap = errors.New("an operand's strides cannot be expressed as a TMA tensor map")

// encodeSM90A writes, with e, the tensor maps of a's operands (a.P filled)
// for the Hopper kernel v: the host side of its launch contract
// (kernels.SM90AMaps); d.mu is held (e is the device's).
func encodeSM90A(e *cuda.TensorMapEncoder, v kernels.Variant, a *kernels.Sm90FwdArgs) error {
	views, ok := kernels.SM90AMaps(v, &a.P)
	if !ok {
		return errNoTensorMap
	}
	maps := [3]*[cuda.TensorMapSize]byte{&a.QMap, &a.KMap, &a.VMap}
	for i, base := range [3]uint64{a.P.Q, a.P.K, a.P.V} {
		vw := views[i]
		if err := e.EncodeTiledFP16(maps[i], base, vw.Dims, vw.Strides, [4]uint32{kernels.SM90ABox, vw.BoxRows, 1, 1}); err != nil {
			return err
		}
	}
	return nil
}

// fwdConfig is the forward kernel's launch (the contract of internal/kernels):
// a CTA per query block and (batch, head), or for a persistent kernel
// at most ctas CTAs (Device.ctas), each walking its share of those tiles.
func fwdConfig(ki KernelInfo, f launchFields, ctas int) cuda.LaunchConfig {
	grid := [3]uint32{cdiv(f.nq, ki.Br), uint32(f.bh), 1}
	if ki.Persistent {
		grid = [3]uint32{min(grid[0]*grid[1], uint32(max(ctas, 1))), 1, 1}
	}
	return cuda.LaunchConfig{Grid: grid, Block: [3]uint32{uint32(32 * ki.Warps), 1, 1}, SharedMem: uint32(ki.SmemBytes)}
}

// bwdConfigs are the launches of pre, dK/dV and dQ (the contract of
// internal/kernels; the causal ordered single pass's grid has the heads fastest).
func bwdConfigs(ks [3]*loadedKernel, f launchFields) [3]cuda.LaunchConfig {
	grids := [3][3]uint32{
		{cdiv(f.nq, ks[0].info.Br), uint32(f.bh), 1},
		{cdiv(f.nk, ks[1].info.Bc), uint32(f.bhkv), 1},
		{cdiv(f.nq, ks[2].info.Br), uint32(f.bh), 1},
	}
	if kernels.HeadsFastest(ks[1].v) {
		grids[1] = [3]uint32{uint32(f.bhkv), cdiv(f.nk, ks[1].info.Bc), 1}
	}
	var cfgs [3]cuda.LaunchConfig
	for i, k := range ks {
		cfgs[i] = cuda.LaunchConfig{Grid: grids[i], Block: [3]uint32{uint32(32 * k.info.Warps), 1, 1}, SharedMem: uint32(k.info.SmemBytes)}
	}
	return cfgs
}

// setFwd and setBwd write the sizes and the scale into a parameter block.
func (f launchFields) setFwd(p *kernels.FwdParams) {
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = f.dims[0], f.dims[1], f.dims[2], f.dims[3], f.dims[4], f.dims[5]
	p.Scale, p.ScaleLog2 = f.scale, f.scaleLog2
	p.WindowLeft, p.WindowRight, p.Softcap = f.window[0], f.window[1], f.softcap
}

func (f launchFields) setBwd(p *kernels.BwdParams) {
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = f.dims[0], f.dims[1], f.dims[2], f.dims[3], f.dims[4], f.dims[5]
	p.Scale, p.ScaleLog2 = f.scale, f.scaleLog2
	p.WindowLeft, p.WindowRight, p.Softcap = f.window[0], f.window[1], f.softcap
}

// launchFields are what both parameter blocks take from the problem,
// computed once per call: the strides of the dense q-shaped (q, O, dO, dQ)
// and kv-shaped (k, v, dK, dV) operands, the sizes and the scale.
type launchFields struct {
	qs, kvs          [3]int64 // batch, row and head strides, in elements
	dims             [6]int32 // B, Nq, Nk, Hq, Hkv, D
	scale, scaleLog2 float32  // the kernels use exp2: scale * log2(e)
	nq, nk, bh, bhkv int      // grid extents: rows, keys, B*Hq, B*Hkv
	window           [2]int32 // left, right reach (-1 unbounded), for the modified kernels
	softcap          float32  // 0: none
}

func fieldsOf(p problem) launchFields {
	qs, kvs := p.QShape().ContiguousStrides(), p.KVShape().ContiguousStrides()
	return launchFields{
		qs:    [3]int64{int64(qs[0]), int64(qs[1]), int64(qs[2])},
		kvs:   [3]int64{int64(kvs[0]), int64(kvs[1]), int64(kvs[2])},
		dims:  [6]int32{int32(p.B), int32(p.Nq), int32(p.Nk), int32(p.Hq), int32(p.Hkv), int32(p.D)},
		scale: float32(p.Scale), scaleLog2: float32(p.Scale * log2e),
		nq: p.Nq, nk: p.Nk, bh: p.B * p.Hq, bhkv: p.B * p.Hkv,
		window: [2]int32{int32(p.Left), int32(p.Right)}, softcap: float32(p.Softcap),
	}
}

// set3 writes batch, row and head strides s into one operand's fields.
func set3(s [3]int64, batch, row, head *int64) { *batch, *row, *head = s[0], s[1], s[2] }

// cdiv is the number of blocks of b that cover a.
func cdiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// checkProblem rejects problems whose launch grid the device cannot
// express and scales with which the kernels' float32 scores could overflow.
func (d *Device) checkProblem(p problem) error {
	if m := maxGPUScale(p.D); p.Scale > m {
		return &UnsupportedError{Backend: GPU, Feature: "scale", Value: fmt.Sprint(p.Scale),
			Reason: fmt.Sprintf("at head dim %d the kernels' scores scale*log2(e)*q.k could exceed float32 for fp16 inputs above %.3g", p.D, m)}
	}
	return d.checkGrid(p.Dims, p.entry == kvEntry)
}

// maxGPUScale is the largest scale at which no score of fp16 inputs can
// overflow in the kernels: |q.k| <= D*65504^2, and they multiply it by
// scale*log2(e) in float32.
func maxGPUScale(d int) float64 {
	return math.MaxFloat32 / (float64(d) * fp16Max * fp16Max * log2e)
}

// checkGrid rejects problems whose launch grid the device cannot express:
// one CTA row (grid y) per (batch, head), or with kvHeads per (batch, kv
// head), as decode launches, whose query heads ride in a CTA as packed rows
// (their grid z is checked with the kernel's tile, decodeRowTiles).
func (d *Device) checkGrid(dims Dims, kvHeads bool) error {
	rows, what, per := dims.B*dims.Hq, "B*Hq", "(batch, head)"
	if kvHeads {
		rows, what, per = dims.B*dims.Hkv, "B*Hkv", "(batch, kv head)"
	}
	if rows > d.maxGridY {
		return &UnsupportedError{Backend: GPU, Feature: what, Value: fmt.Sprint(rows),
			Reason: fmt.Sprintf("one CTA row per %s: at most %d on %s", per, d.maxGridY, d.info)}
	}
	if dims.Nq > math.MaxInt32 || dims.Nk > math.MaxInt32 {
		return &UnsupportedError{Backend: GPU, Feature: "sequence length", Value: fmt.Sprint(max(dims.Nq, dims.Nk)),
			Reason: "the kernels index rows with int32"}
	}
	return nil
}
