package flashattn

import (
	"errors"
	"fmt"
	"math"

	"github.com/goflash/goflash/internal/cuda"
)

// Forward runs the FA2 forward kernel on device tensors q (B, Nq, Hq, D) and
// k, v (B, Nk, Hkv, D) and returns O and the LSE on the device. It waits for
// the kernel, so a kernel fault is reported here. The options used are
// Causal and Scale; the call costs one extra device buffer, the LSE (B*Hq*Nq
// float32).
func (d *Device) Forward(q, k, v *DeviceTensor, o *Options) (*DeviceResult, error) {
	for _, a := range []struct {
		name string
		t    *DeviceTensor
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := a.t.usable(a.name, d); err != nil {
			return nil, err
		}
	}
	dims, err := dimsOfShapes(q.shape, k.shape, v.shape)
	if err != nil {
		return nil, err
	}
	if err := o.check(dims); err != nil {
		return nil, err
	}
	scale, _ := o.scale(dims.D)
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.forward(dims, q, k, v, scale, o != nil && o.Causal)
}

// dimsOfShapes is DimsOf for shapes alone.
func dimsOfShapes(q, k, v Shape) (Dims, error) {
	for _, a := range []struct {
		name string
		s    Shape
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := checkShape(a.name, a.s); err != nil {
			return Dims{}, err
		}
	}
	d := Dims{B: q.B, Nq: q.N, Nk: k.N, Hq: q.H, Hkv: k.H, D: q.D}
	if err := d.Validate(); err != nil {
		return Dims{}, err
	}
	if err := expectShape("k", k, d.KVShape()); err != nil {
		return Dims{}, err
	}
	if err := expectShape("v", v, d.KVShape()); err != nil {
		return Dims{}, err
	}
	return d, nil
}

// forward allocates O and the LSE, poisons them, launches and waits; d.mu
// is held.
func (d *Device) forward(dims Dims, q, k, v *DeviceTensor, scale float64, causal bool) (*DeviceResult, error) {
	kern, err := d.kernel(dims, causal)
	if err != nil {
		return nil, err
	}
	if err := d.checkGrid(dims); err != nil {
		return nil, err
	}
	out, err := d.alloc(dims.QShape())
	if err != nil {
		return nil, err
	}
	lse, err := d.ctx.Alloc(4 * dims.LSELen())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("flashattn: allocating the LSE on %s: %w", d.info, err), out.buf.Free())
	}
	r := &DeviceResult{Dims: dims, Out: out, Kernel: kern.info, lse: lse}
	fail := func(err error) (*DeviceResult, error) { return nil, errors.Join(err, r.Free()) }
	if err := out.buf.Memset32(nanFP16x2, out.buf.Size()/4); err != nil {
		return fail(err)
	}
	if err := lse.Memset32(nanF32, dims.LSELen()); err != nil {
		return fail(err)
	}
	if err := d.launch(kern, dims, q, k, v, out.buf, lse, scale); err != nil {
		return fail(err)
	}
	if err := d.stream.Synchronize(); err != nil {
		return fail(fmt.Errorf("flashattn: kernel %s on %s: %w", kern.info.Symbol, d.info, err))
	}
	return r, nil
}

// checkGrid rejects problems whose launch grid the device cannot express.
func (d *Device) checkGrid(dims Dims) error {
	if dims.B*dims.Hq > d.maxGridY {
		return &UnsupportedError{Backend: GPU, Feature: "B*Hq", Value: fmt.Sprint(dims.B * dims.Hq),
			Reason: fmt.Sprintf("one CTA row per (batch, head): at most %d on %s", d.maxGridY, d.info)}
	}
	if dims.Nq > math.MaxInt32 || dims.Nk > math.MaxInt32 {
		return &UnsupportedError{Backend: GPU, Feature: "sequence length", Value: fmt.Sprint(max(dims.Nq, dims.Nk)),
			Reason: "the kernels index rows with int32"}
	}
	return nil
}

// launch fills the pinned parameter block and enqueues the kernel on the
// device's stream (the launch contract of internal/kernels); d.mu is held.
func (d *Device) launch(kern *loadedKernel, dims Dims, q, k, v *DeviceTensor, o, lse *cuda.Buffer, scale float64) error {
	qs, kvs := dims.QShape().ContiguousStrides(), dims.KVShape().ContiguousStrides()
	p := d.params
	p.Q, p.K, p.V, p.O, p.LSE = q.buf.Ptr(), k.buf.Ptr(), v.buf.Ptr(), o.Ptr(), lse.Ptr()
	p.QBatchStride, p.QRowStride, p.QHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.KBatchStride, p.KRowStride, p.KHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.VBatchStride, p.VRowStride, p.VHeadStride = int64(kvs[0]), int64(kvs[1]), int64(kvs[2])
	p.OBatchStride, p.ORowStride, p.OHeadStride = int64(qs[0]), int64(qs[1]), int64(qs[2])
	p.B, p.Nq, p.Nk, p.Hq, p.Hkv, p.D = int32(dims.B), int32(dims.Nq), int32(dims.Nk), int32(dims.Hq), int32(dims.Hkv), int32(dims.D)
	p.Scale = float32(scale)
	p.ScaleLog2 = float32(scale * log2e)
	ki := kern.info
	cfg := cuda.LaunchConfig{
		Grid:      [3]uint32{uint32((dims.Nq + ki.Br - 1) / ki.Br), uint32(dims.B * dims.Hq), 1},
		Block:     [3]uint32{uint32(32 * ki.Warps), 1, 1},
		SharedMem: uint32(ki.SmemBytes),
	}
	return kern.fn.Launch(cfg, d.stream, d.args)
}
