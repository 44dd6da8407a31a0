package flashattn

import (
	"errors"
	"fmt"
	"math"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// DeviceGrads is the output of Device.Backward: the gradients on the device,
// fp16, dense BSHD.
type DeviceGrads struct {
	Dims    Dims
	DQ      *DeviceTensor // (B, Nq, Hq, D)
	DK, DV  *DeviceTensor // (B, Nk, Hkv, D)
	Kernels []KernelInfo  // the kernels that ran, in launch order: pre (Di), dK/dV, dQ
}

// Free releases dQ, dK and dV.
func (g *DeviceGrads) Free() error {
	return errors.Join(g.DQ.Free(), g.DK.Free(), g.DV.Free())
}

// UploadResult copies a forward result computed elsewhere (on the CPU, or
// read from disk) to the device for Backward: out is (B, Nq, Hq, D) and is
// rounded to fp16, lse is (B, Hq, Nq), natural log, -Inf for rows that see
// no key.
func (d *Device) UploadResult(dims Dims, out *Tensor, lse []float32) (*DeviceResult, error) {
	if err := dims.Validate(); err != nil {
		return nil, err
	}
	if err := out.check("out"); err != nil {
		return nil, err
	}
	if err := expectShape("out", out.Shape, dims.QShape()); err != nil {
		return nil, err
	}
	if len(lse) != dims.LSELen() {
		return nil, &DataError{Arg: "lse", Len: len(lse), Need: dims.LSELen()}
	}
	for i, x := range lse {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, &DataError{Arg: "lse", Reason: fmt.Sprintf("element %d is %v (want finite or -Inf)", i, x)}
		}
	}
	o, err := d.Upload(out)
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
	return &DeviceResult{Dims: dims, Out: o, lse: buf}, nil
}

// BackwardKernels returns the three kernels Backward runs for dims (pre,
// dK/dV, dQ), loading them on first use. A head dim without backward kernels
// (D 256; see BackwardHeadDims) is an *UnsupportedError.
func (d *Device) BackwardKernels(dims Dims, causal bool) ([]KernelInfo, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	ks, err := d.bwdKernels(dims, causal)
	if err != nil {
		return nil, err
	}
	return []KernelInfo{ks[0].info, ks[1].info, ks[2].info}, nil
}

// bwdKernels loads the pre, dK/dV and dQ kernels for dims; d.mu is held.
func (d *Device) bwdKernels(dims Dims, causal bool) ([3]*loadedKernel, error) {
	var ks [3]*loadedKernel
	for i, p := range []kernels.Pass{kernels.BwdPre, kernels.BwdDKDV, kernels.BwdDQ} {
		k, err := d.passKernel(p, dims, causal)
		if err != nil {
			return ks, err
		}
		ks[i] = k
	}
	return ks, nil
}

// Backward runs the FA2 backward pass on the device: q, k, v are the inputs
// of the forward call, fwd its result (O and the LSE; see also UploadResult)
// and dOut the gradient of O, (B, Nq, Hq, D). It returns dQ, dK and dV
// (fp16, fp32 accumulation) and waits for the kernels, so a kernel fault is
// reported here. The options used are Causal and Scale, which must be those
// of the forward call. No kernel uses atomics (dK/dV and dQ are computed by
// separate kernels that each own their outputs), so results are always
// bit-reproducible: Options.Deterministic is honoured whatever its value.
// Beyond its outputs the call allocates Di = rowsum(dO*O), B*Hq*Nq float32,
// and frees it before returning.
func (d *Device) Backward(q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor, o *Options) (*DeviceGrads, error) {
	if fwd == nil {
		return nil, &DataError{Arg: "fwd", Reason: "forward result is nil"}
	}
	for _, a := range []struct {
		name string
		t    *DeviceTensor
	}{{"q", q}, {"k", k}, {"v", v}, {"out", fwd.Out}, {"dOut", dOut}} {
		if err := a.t.usable(a.name, d); err != nil {
			return nil, err
		}
	}
	if fwd.lse == nil || fwd.lse.Freed() {
		return nil, fmt.Errorf("lse: %w", ErrFreed)
	}
	dims, err := dimsOfShapes(q.shape, k.shape, v.shape)
	if err != nil {
		return nil, err
	}
	if err := expectShape("out", fwd.Out.shape, dims.QShape()); err != nil {
		return nil, err
	}
	if err := expectShape("dOut", dOut.shape, dims.QShape()); err != nil {
		return nil, err
	}
	if fwd.Dims != dims || fwd.lse.Size() < 4*dims.LSELen() {
		return nil, &DataError{Arg: "fwd", Reason: fmt.Sprintf("result of a problem %+v, not %+v", fwd.Dims, dims)}
	}
	if err := o.check(dims); err != nil {
		return nil, err
	}
	scale, _ := o.scale(dims.D)
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.backward(dims, q, k, v, fwd.Out, fwd.lse, dOut, scale, o != nil && o.Causal)
}

// backward allocates the gradients and Di, poisons the gradients, launches
// the three kernels and waits; d.mu is held.
func (d *Device) backward(dims Dims, q, k, v, out *DeviceTensor, lse *cuda.Buffer, dOut *DeviceTensor, scale float64, causal bool) (*DeviceGrads, error) {
	ks, err := d.bwdKernels(dims, causal)
	if err != nil {
		return nil, err
	}
	if err := d.checkGrid(dims); err != nil {
		return nil, err
	}
	g := &DeviceGrads{Dims: dims, Kernels: []KernelInfo{ks[0].info, ks[1].info, ks[2].info}}
	fail := func(err error) (*DeviceGrads, error) {
		for _, t := range []*DeviceTensor{g.DQ, g.DK, g.DV} {
			if t != nil {
				err = errors.Join(err, t.Free())
			}
		}
		return nil, err
	}
	for _, x := range []struct {
		dst **DeviceTensor
		s   Shape
	}{{&g.DQ, dims.QShape()}, {&g.DK, dims.KVShape()}, {&g.DV, dims.KVShape()}} {
		t, err := d.alloc(x.s)
		if err != nil {
			return fail(err)
		}
		*x.dst = t
		if err := t.buf.Memset32(nanFP16x2, t.buf.Size()/4); err != nil {
			return fail(err)
		}
	}
	dsum, err := d.ctx.Alloc(4 * dims.LSELen())
	if err != nil {
		return fail(fmt.Errorf("flashattn: allocating Di on %s: %w", d.info, err))
	}
	defer func() { _ = dsum.Free() }()
	if err := dsum.Memset32(nanF32, dims.LSELen()); err != nil {
		return fail(err)
	}
	if err := d.launchBwd(ks, dims, q, k, v, out, lse, dOut, dsum, g, scale); err != nil {
		return fail(err)
	}
	if err := d.stream.Synchronize(); err != nil {
		return fail(fmt.Errorf("flashattn: backward kernels %s, %s, %s on %s: %w", ks[0].info.Symbol, ks[1].info.Symbol, ks[2].info.Symbol, d.info, err))
	}
	return g, nil
}

// launchBwd fills the backward parameter block and enqueues pre, dK/dV and dQ
// on the device's stream (the launch contract of internal/kernels); d.mu is held.
func (d *Device) launchBwd(ks [3]*loadedKernel, dims Dims, q, k, v, out *DeviceTensor, lse *cuda.Buffer, dOut *DeviceTensor,
	dsum *cuda.Buffer, g *DeviceGrads, scale float64) error {
	qs, kvs := dims.QShape().ContiguousStrides(), dims.KVShape().ContiguousStrides()
	p := d.bparams
	p.Q, p.K, p.V, p.O, p.DO = q.buf.Ptr(), k.buf.Ptr(), v.buf.Ptr(), out.buf.Ptr(), dOut.buf.Ptr()
	p.LSE, p.Di = lse.Ptr(), dsum.Ptr()
	p.DQ, p.DK, p.DV = g.DQ.buf.Ptr(), g.DK.buf.Ptr(), g.DV.buf.Ptr()
	p.QBatchStride, p.QRowStride, p.QHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.OBatchStride, p.ORowStride, p.OHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.DOBatchStride, p.DORowStride, p.DOHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.DQBatchStride, p.DQRowStride, p.DQHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.KBatchStride, p.KRowStride, p.KHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.VBatchStride, p.VRowStride, p.VHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.DKBatchStride, p.DKRowStride, p.DKHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.DVBatchStride, p.DVRowStride, p.DVHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = int32(dims.B), int32(dims.Nq), int32(dims.Nk), int32(dims.Hq), int32(dims.Hkv), int32(dims.D)
	p.Scale = float32(scale)
	p.ScaleLog2 = float32(scale * log2e)
	cdiv := func(a, b int) uint32 { return uint32((a + b - 1) / b) }
	pre, kv, dq := ks[0].info, ks[1].info, ks[2].info
	for _, l := range []struct {
		k    *loadedKernel
		grid [3]uint32
	}{
		{ks[0], [3]uint32{cdiv(dims.Nq, pre.Br), uint32(dims.B * dims.Hq), 1}},
		{ks[1], [3]uint32{cdiv(dims.Nk, kv.Bc), uint32(dims.B * dims.Hkv), 1}},
		{ks[2], [3]uint32{cdiv(dims.Nq, dq.Br), uint32(dims.B * dims.Hq), 1}},
	} {
		cfg := cuda.LaunchConfig{Grid: l.grid, Block: [3]uint32{uint32(32 * l.k.info.Warps), 1, 1}, SharedMem: uint32(l.k.info.SmemBytes)}
		if err := l.k.fn.Launch(cfg, d.stream, d.bargs); err != nil {
			return fmt.Errorf("flashattn: launching %s on %s: %w", l.k.info.Symbol, d.info, err)
		}
	}
	return nil
}
