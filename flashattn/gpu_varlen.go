package flashattn

import (
	"fmt"

	"github.com/goflash/goflash/internal/cuda"
)

// ForwardVarlen is flashattn.ForwardVarlen on device tensors: q
// (1, total_q, Hq, D) and k, v (1, total_k, Hkv, D), all fp16 or all bf16
// (sm_80 and newer), packed as vl describes. One kernel launch (KernelInfo.Pass
// "fwd_varlen"; on an H100/H200 at HopperHeadDims the Hopper forward's
// varlen twin, elsewhere the sm_80 path's) runs every sequence; the call uploads vl's cumulative
// lengths once (int32, freed on return) and waits. The options used are
// Causal (bottom-right per sequence), Scale, Window, Softcap and ALiBi (then
// the modified kernel, Pass "fwd_mod*", takes the packed sequences). The LSE
// is (1, Hq, total_q), as ForwardVarlen's.
func (d *Device) ForwardVarlen(q, k, v *DeviceTensor, vl Varlen, o *Options) (*DeviceResult, error) {
	if err := varlenDeviceBatch(q, k, v); err != nil {
		return nil, err
	}
	p, err := d.problemOf(o, q, k, v)
	if err != nil {
		return nil, err
	}
	if err := vl.check(p.Dims); err != nil {
		return nil, err
	}
	p.entry, p.varlen = varlenEntry, &vl
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.forward(p, q, k, v)
}

// BackwardVarlen is flashattn.BackwardVarlen on device tensors: q, k, v and
// dOut packed as vl describes (as ForwardVarlen's), fwd the result of
// ForwardVarlen on them (or of UploadResultAs: an LSE of (1, Hq, total_q)),
// all fp16 or all bf16 (the sm_80 path). Three launches run every sequence:
// the three-kernel backward's pre (Di), dK/dV and dQ kernels with the
// varlen flag (KernelInfo.Pass "bwd_pre_varlen", "bwd_dkdv_varlen",
// "bwd_dq_varlen"), on both paths, so the result is bit-reproducible
// whatever Options.Deterministic says. A head dim without those kernels
// (256: the single pass alone) runs the varlen pre, the modified single pass
// ("bwd_dkdvq_mod", which takes the packed sequences, modifiers or not; dQ
// summed with atomics, so its last bits may differ between calls) and its
// convert kernel, where that fits the device (Device.SupportedHeadDims of
// OpVarlenBackward);
// with Options.Deterministic its ordered twin ("bwd_dkdvqdet_mod": the dQ
// additions in a fixed order, so bit-reproducible), on every sm_80+ part.
// Where neither fits (Turing) the head dim is an *UnsupportedError. The options used are Causal (bottom-right
// per sequence), Scale, Window, Softcap and ALiBi (then pre's varlen kernel
// and the modified dK/dV and dQ kernels, "bwd_dkdv_mod", "bwd_dq_mod", which
// take the packed sequences). Beyond dQ, dK and dV the call allocates Di (Hq*total_q
// float32) and the cumulative lengths (int32), and on the single pass its dQ
// accumulator (Hq*(total_q + 128*Seqs)*D float32, deterministic: and one
// int32 counter per query block's rows: kernels.DQAccumLenPacked), freed on
// return.
func (d *Device) BackwardVarlen(q, k, v *DeviceTensor, fwd *DeviceResult, dOut *DeviceTensor, vl Varlen, o *Options) (*DeviceGrads, error) {
	if err := varlenDeviceBatch(q, k, v); err != nil {
		return nil, err
	}
	p, err := d.backwardProblem(q, k, v, fwd, dOut, o)
	if err != nil {
		return nil, err
	}
	if err := vl.check(p.Dims); err != nil {
		return nil, err
	}
	c := varlenCall{p: p, vl: vl}
	c.p.entry, c.p.varlen = varlenEntry, &vl
	if fwd.lastNoKey >= 0 { // an uploaded LSE with -Inf rows: each must be a row of its sequence that sees no key
		lse, err := fwd.LSE()
		if err != nil {
			return nil, err
		}
		if _, err := c.seqLSEs(lse); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.backward(c.p, q, k, v, fwd, dOut)
}

// varlenCuLens is vl's cumulative lengths as the varlen kernels read
// them: one int32 array, cu_seqlens_q then cu_seqlens_k (Seqs+1 each).
func varlenCuLens(vl Varlen) []int32 {
	cu := make([]int32, 0, len(vl.CuSeqlensQ)+len(vl.CuSeqlensK))
	for _, c := range [][]int{vl.CuSeqlensQ, vl.CuSeqlensK} {
		for _, x := range c {
			cu = append(cu, int32(x))
		}
	}
	return cu
}

// maxSeqlen is the longest sequence's length in cu: the grid's row (key) blocks.
func maxSeqlen(cu []int) int {
	m := 0
	for s := 1; s < len(cu); s++ {
		m = max(m, cu[s]-cu[s-1])
	}
	return m
}

// varlenHostBytes is what the GPU varlen path allocates on the host beyond
// its outputs: the packed problem's 16-bit copies (gpuImpl.hostBytes) and
// the int32 cumulative lengths.
func varlenHostBytes(c varlenCall, backward bool) float64 {
	return gpuImpl{}.hostBytes(c.p, nil, backward) + 4*float64(len(varlenCuLens(c.vl)))
}

// varlenCuBytes is the device memory of a varlen call's int32 cumulative
// lengths.
func varlenCuBytes(p problem) int64 {
	return 4 * int64(len(varlenCuLens(*p.varlen)))
}

// uploadVarlen uploads vl's cumulative lengths (varlenCuLens; freed by the
// caller, also on error); d.mu is held.
func (d *Device) uploadVarlen(vl Varlen) (*cuda.Buffer, error) {
	cu := varlenCuLens(vl)
	buf, err := d.ctx.Alloc(4 * len(cu))
	if err != nil {
		return nil, fmt.Errorf("flashattn: allocating the cumulative sequence lengths on %s: %w", d.info, err)
	}
	return buf, cuda.CopyToDevice(buf, cu)
}

// cuPtrs are the device pointers of cu_seqlens_q and cu_seqlens_k in cu
// (varlenCuLens of seqs sequences), or 0, 0 without one.
func cuPtrs(cu *cuda.Buffer, seqs int) (q, k uint64) {
	if cu == nil {
		return 0, 0
	}
	return cu.Ptr(), cu.Ptr() + 4*uint64(seqs+1)
}

// varlenDeviceBatch is varlenBatch for device tensors (nil ones are left to
// problemOf).
func varlenDeviceBatch(ts ...*DeviceTensor) error {
	for i, t := range ts {
		if t == nil {
			continue
		}
		if err := varlenBatch(argNames[i], t.shape.B); err != nil {
			return err
		}
	}
	return nil
}
