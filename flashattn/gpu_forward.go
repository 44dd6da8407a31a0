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
// float32). q, k and v are all fp16 or all bf16 (UploadAs; bf16 on the
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

// fwdOp is one forward call: its plan, kernel, operands and buffers.
type fwdOp struct {
	d       *Device
	pl      plan
	kern    *loadedKernel
	f       launchFields
	q, k, v *DeviceTensor
	res     *DeviceResult
	bufs    callBuffers // O and the LSE (res's), the cumulative lengths and ALiBi's slopes
}

// newForward plans the call, loads its kernel and allocates O and the LSE,
// poisoned; d.mu is held.
func (d *Device) newForward(p problem, q, k, v *DeviceTensor) (*fwdOp, error) {
	pl, ks, err := d.plan(planRequest{op: opForward, p: p, dt: q.dtype})
	if err != nil {
		return nil, err
	}
	bufs, err := d.allocCall(p, q.dtype, "the LSE", p.QShape())
	if err != nil {
		return nil, err
	}
	return &fwdOp{d: d, pl: pl, kern: ks[0], f: fieldsOf(p), q: q, k: k, v: v, bufs: bufs,
		res: &DeviceResult{Dims: p.Dims, Out: bufs.outs[0], Kernel: ks[0].info, lse: bufs.rows, lastNoKey: -1}}, nil
}

// callBuffers are what a forward, backward or decode call allocates beside
// its operands: its outputs and float32 rows (the LSE, or the backward's
// Di), poisoned so that an element the kernels leave unwritten shows, and
// its uploads: the cumulative lengths of packed sequences and ALiBi's
// slopes (nil where the problem has none).
type callBuffers struct {
	outs   []*DeviceTensor
	rows   *cuda.Buffer
	cu     *cuda.Buffer // varlenCuLens, seqs sequences
	seqs   int
	slopes *cuda.Buffer // float32, Hq
}

// allocCall allocates the buffers of p's call: outputs of dtype dt and
// shapes outs, and one float32 per LSE entry, named rows in errors; on
// failure nothing stays allocated. d.mu is held.
func (d *Device) allocCall(p problem, dt DType, rows string, outs ...Shape) (b callBuffers, err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, b.free())
		}
	}()
	for _, s := range outs {
		t, err := d.allocAs(s, dt)
		if err != nil {
			return b, err
		}
		b.outs = append(b.outs, t)
		if err := t.buf.Memset32(poisonOf(dt), t.buf.Size()/4); err != nil {
			return b, err
		}
	}
	if b.rows, err = d.ctx.Alloc(p.LSEBytes()); err != nil {
		return b, fmt.Errorf("flashattn: allocating %s on %s: %w", rows, d.info, err)
	}
	if err := b.rows.Memset32(nanF32, p.LSELen()); err != nil {
		return b, err
	}
	if p.varlen != nil {
		b.seqs = p.varlen.Seqs()
		if b.cu, err = d.uploadVarlen(*p.varlen); err != nil {
			return b, err
		}
	}
	b.slopes, err = d.uploadSlopes(p)
	return b, err
}

// free releases every buffer of b.
func (b callBuffers) free() error {
	var err error
	for _, t := range b.outs {
		err = errors.Join(err, t.Free())
	}
	return errors.Join(err, freeBuffers(b.rows), b.freeUploads())
}

// freeUploads releases the cumulative lengths and the slopes, which no
// caller sees.
func (b callBuffers) freeUploads() error { return freeBuffers(b.cu, b.slopes) }

// uploadBytes is the device memory of the uploads.
func (b callBuffers) uploadBytes() int64 {
	var n int64
	for _, x := range []*cuda.Buffer{b.cu, b.slopes} {
		if x != nil {
			n += int64(x.Size())
		}
	}
	return n
}

// freeBuffers frees the buffers not nil and not freed yet.
func freeBuffers(bs ...*cuda.Buffer) error {
	var err error
	for _, b := range bs {
		if b != nil && !b.Freed() {
			err = errors.Join(err, b.Free())
		}
	}
	return err
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

func (op *fwdOp) kernels() []KernelInfo { return []KernelInfo{op.kern.info} }
func (op *fwdOp) free() error           { return op.bufs.free() }

// freeScratch frees the ALiBi slopes and the varlen lengths, which no caller
// sees.
func (op *fwdOp) freeScratch() error { return op.bufs.freeUploads() }

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
	p.ALiBi = slopesPtr(op.bufs.slopes)
	p.CuSeqlensQ, p.CuSeqlensK = cuPtrs(op.bufs.cu, op.bufs.seqs)
	if op.kern.v.Arch == kernels.SM90A {
		if err := encodeSM90A(d.tmaps, op.kern.v, d.hparams); err != nil {
			return fmt.Errorf("flashattn: %s on %s: %w", ki.Symbol, d.info, err)
		}
	}
	return op.kern.fn.Launch(op.pl.cfgs[0], d.stream, args)
}

func (op *fwdOp) relaunch() error {
	args := op.d.args
	if op.kern.v.Arch == kernels.SM90A {
		args = op.d.hargs
	}
	return op.kern.fn.LaunchBound(op.pl.cfgs[0], op.d.stream.Handle(), args)
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
	return encodeMaps(e, v.BF16, []*[cuda.TensorMapSize]byte{&a.QMap, &a.KMap, &a.VMap}, []uint64{a.P.Q, a.P.K, a.P.V}, views[:])
}

// encodeSM90ABwd writes, with e, the tensor maps of a's operands (a.P
// filled) for the Hopper single pass v (kernels.SM90ABwdMaps); d.mu is held.
func encodeSM90ABwd(e *cuda.TensorMapEncoder, v kernels.Variant, a *kernels.Sm90BwdArgs) error {
	views, ok := kernels.SM90ABwdMaps(v, &a.P)
	if !ok {
		return errNoTensorMap
	}
	return encodeMaps(e, v.BF16, []*[cuda.TensorMapSize]byte{&a.QMap, &a.KMap, &a.VMap, &a.DOMap},
		[]uint64{a.P.Q, a.P.K, a.P.V, a.P.DO}, views[:])
}

// encodeMaps encodes maps[i], the tensor map of the operand at device
// address bases[i] as views[i] describes it, in boxes of SM90ABox columns.
func encodeMaps(e *cuda.TensorMapEncoder, bf16 bool, maps []*[cuda.TensorMapSize]byte, bases []uint64, views []kernels.TensorMapView) error {
	for i, vw := range views {
		if err := e.EncodeTiled16(maps[i], bf16, bases[i], vw.Dims, vw.Strides, [4]uint32{kernels.SM90ABox, vw.BoxRows, 1, 1}); err != nil {
			return err
		}
	}
	return nil
}

// fwdConfig is forward kernel v's launch (the contract of internal/kernels):
// a CTA per query block and (batch, head), or for a persistent kernel
// at most ctas CTAs (Device.ctas), each walking its share of those tiles.
func fwdConfig(v kernels.Variant, f launchFields, ctas int) cuda.LaunchConfig {
	grid := [3]uint32{cdiv(f.nq, v.Br), uint32(f.bh), 1}
	if v.Persistent {
		grid = [3]uint32{min(grid[0]*grid[1], uint32(max(ctas, 1))), 1, 1}
	}
	return cuda.LaunchConfig{Grid: grid, Block: [3]uint32{uint32(32 * v.Warps), 1, 1}, SharedMem: uint32(v.SmemBytes)}
}

// bwdConfigs are the launches of pre, dK/dV and dQ, vs (the contract of
// internal/kernels; the ordered single pass's grid has the heads fastest).
func bwdConfigs(vs []kernels.Variant, f launchFields) []cuda.LaunchConfig {
	grids := [3][3]uint32{
		{cdiv(f.nq, vs[0].Br), uint32(f.bh), 1},
		{cdiv(f.nk, vs[1].Bc), uint32(f.bhkv), 1},
		{cdiv(f.nq, vs[2].Br), uint32(f.bh), 1},
	}
	if kernels.HeadsFastest(vs[1]) {
		grids[1] = [3]uint32{uint32(f.bhkv), cdiv(f.nk, vs[1].Bc), 1}
	}
	cfgs := make([]cuda.LaunchConfig, len(vs))
	for i, v := range vs {
		cfgs[i] = cuda.LaunchConfig{Grid: grids[i], Block: [3]uint32{uint32(32 * v.Warps), 1, 1}, SharedMem: uint32(v.SmemBytes)}
	}
	return cfgs
}

// setFwd and setBwd write the sizes and the scale into a parameter block.
func (f launchFields) setFwd(p *kernels.FwdParams) {
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = f.dims[0], f.dims[1], f.dims[2], f.dims[3], f.dims[4], f.dims[5]
	p.Scale, p.ScaleLog2 = f.scale, f.scaleLog2
	p.WindowLeft, p.WindowRight, p.Softcap = f.window[0], f.window[1], f.softcap
	p.Seqs, p.MaxNq = f.seqs, f.maxNq
}

func (f launchFields) setBwd(p *kernels.BwdParams) {
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = f.dims[0], f.dims[1], f.dims[2], f.dims[3], f.dims[4], f.dims[5]
	p.Scale, p.ScaleLog2 = f.scale, f.scaleLog2
	p.WindowLeft, p.WindowRight, p.Softcap = f.window[0], f.window[1], f.softcap
}

// launchFields are what both parameter blocks take from the problem,
// computed once per call: the strides of the dense q-shaped (q, O, dO, dQ)
// and kv-shaped (k, v, dK, dV) operands, the sizes and the scale, and the
// grid's extents: for packed sequences the longest sequence's rows and
// keys by Seqs*Hq (Seqs*Hkv) CTAs, those past a shorter sequence's rows
// (keys) exiting at once.
type launchFields struct {
	qs, kvs          [3]int64 // batch, row and head strides, in elements
	dims             [6]int32 // B, Nq, Nk, Hq, Hkv, D
	scale, scaleLog2 float32  // the kernels use exp2: scale * log2(e)
	nq, nk, bh, bhkv int      // grid extents: rows, keys, B*Hq, B*Hkv
	window           [2]int32 // left, right reach (-1 unbounded), for the modified kernels
	softcap          float32  // 0: none
	seqs, maxNq      int32    // packed sequences: their number and the longest one's rows (FwdParams.Seqs, MaxNq); 0 dense
}

func fieldsOf(p problem) launchFields {
	qs, kvs := p.QShape().ContiguousStrides(), p.KVShape().ContiguousStrides()
	f := launchFields{
		qs:    [3]int64{int64(qs[0]), int64(qs[1]), int64(qs[2])},
		kvs:   [3]int64{int64(kvs[0]), int64(kvs[1]), int64(kvs[2])},
		dims:  [6]int32{int32(p.B), int32(p.Nq), int32(p.Nk), int32(p.Hq), int32(p.Hkv), int32(p.D)},
		scale: float32(p.Scale), scaleLog2: float32(p.Scale * log2e),
		nq: p.Nq, nk: p.Nk, bh: p.B * p.Hq, bhkv: p.B * p.Hkv,
		window: [2]int32{int32(p.Left), int32(p.Right)}, softcap: float32(p.Softcap),
	}
	if vl := p.varlen; vl != nil {
		f.nq, f.nk = maxSeqlen(vl.CuSeqlensQ), maxSeqlen(vl.CuSeqlensK)
		f.bh, f.bhkv = vl.Seqs()*p.Hq, vl.Seqs()*p.Hkv
		f.seqs, f.maxNq = int32(vl.Seqs()), int32(f.nq)
	}
	return f
}

// set3 writes batch, row and head strides s into one operand's fields.
func set3(s [3]int64, batch, row, head *int64) { *batch, *row, *head = s[0], s[1], s[2] }

// cdiv is the number of blocks of b that cover a.
func cdiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// maxGPUScale is the largest scale at which no score of fp16 inputs can
// overflow in the kernels: |q.k| <= D*65504^2, and they multiply it by
// scale*log2(e) in float32.
func maxGPUScale(d int) float64 {
	return math.MaxFloat32 / (float64(d) * fp16Max * fp16Max * log2e)
}
