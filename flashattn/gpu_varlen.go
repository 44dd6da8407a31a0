package flashattn

import (
	"fmt"
	"slices"

	"github.com/goflash/goflash/internal/cuda"
)

// ForwardVarlen is flashattn.ForwardVarlen on device tensors: q
// (1, total_q, Hq, D) and k, v (1, total_k, Hkv, D), all fp16 or all bf16
// (the sm_80 path), packed as vl describes. One kernel launch (KernelInfo.Pass
// "fwd_varlen") runs every sequence; the call uploads vl's cumulative
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

// ForwardVarlenHost is ForwardVarlen for host tensors, as
// flashattn.ForwardVarlen with the GPU backend runs it, but on this device
// (with its kernel path, see ForcePath): upload (fp16), one varlen launch,
// download. All device memory is freed on return; Result.Reason names the
// device and the kernel.
func (d *Device) ForwardVarlenHost(q, k, v *Tensor, vl Varlen, o *Options) (*Result, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	c, err := resolveVarlen(q, k, v, vl, o)
	if err != nil {
		return nil, err
	}
	dm := c.p.Dims
	if err := reserve(fmt.Sprintf("ForwardVarlen of %+v in %d sequences on %s", dm, vl.Seqs(), GPU),
		floats(dm.QShape().Numel(), dm.LSELen())+varlenHostBytes(c, false)); err != nil {
		return nil, err
	}
	out, lse := newOutput(dm.QShape()), newBuffer(dm.LSELen())
	kern, err := d.forwardHost(c.p, q, k, v, out, lse)
	if err != nil {
		return nil, err
	}
	return &Result{Dims: dm, Out: out, LSE: lse, Backend: GPU, Reason: d.reason(kern)}, nil
}

// BackwardVarlen is flashattn.BackwardVarlen on device tensors: q, k, v and
// dOut packed as vl describes (as ForwardVarlen's), fwd the result of
// ForwardVarlen on them (or of UploadResult: an LSE of (1, Hq, total_q)),
// all fp16 or all bf16 (the sm_80 path). Three launches run every sequence:
// the three-kernel backward's pre (Di), dK/dV and dQ kernels with the
// varlen flag (KernelInfo.Pass "bwd_pre_varlen", "bwd_dkdv_varlen",
// "bwd_dq_varlen"), on both paths, so the result is bit-reproducible
// whatever Options.Deterministic says. A head dim without those kernels
// (256: the single pass alone) runs the varlen pre, the modified single pass
// ("bwd_dkdvq_mod", which takes the packed sequences, modifiers or not; dQ
// summed with atomics, so its last bits may differ between calls) and its
// convert kernel, where that fits the device (Device.ModBackwardHeadDims);
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

// BackwardVarlenHost is BackwardVarlen for host tensors, as
// flashattn.BackwardVarlen with the GPU backend runs it, but on this device
// (with its kernel path, see ForcePath): upload (fp16), the three varlen
// launches, download. All device memory is freed on return; Grads.Reason
// names the device and the kernels.
func (d *Device) BackwardVarlenHost(q, k, v, out, dOut *Tensor, lse []float32, vl Varlen, o *Options) (*Grads, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	c, err := resolveVarlen(q, k, v, vl, o)
	if err != nil {
		return nil, err
	}
	dm := c.p.Dims
	if err := checkOutputs(dm, out, dOut); err != nil {
		return nil, err
	}
	if _, err := dm.checkLSE(lse); err != nil {
		return nil, err
	}
	if _, err := c.seqLSEs(lse); err != nil {
		return nil, err
	}
	if err := reserve(fmt.Sprintf("BackwardVarlen of %+v in %d sequences on %s", dm, vl.Seqs(), GPU),
		floats(dm.QShape().Numel(), 2*dm.KVShape().Numel())+varlenHostBytes(c, true)); err != nil {
		return nil, err
	}
	g := &Grads{DQ: newOutput(dm.QShape()), DK: newOutput(dm.KVShape()), DV: newOutput(dm.KVShape()), Backend: GPU}
	ks, err := d.backwardHost(c.p, q, k, v, out, dOut, lse, g.DQ, g.DK, g.DV)
	if err != nil {
		return nil, err
	}
	g.Reason = d.reason(ks...)
	return g, nil
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

// VarlenBenchResult is BenchVarlen's timing of one batch of sequences,
// packed (Device.ForwardVarlen) and padded to the longest (Forward on
// (Seqs, max length, H, D)), or BenchVarlenBackward's (BackwardVarlen and
// Backward). The TFLOPS of both count the real tokens only: the sum over
// sequences of Dims.FLOPs (BackwardFLOPs) of each alone.
type VarlenBenchResult struct {
	Lens           []int
	Varlen, Padded BenchResult
	// PaddedAllTFLOPS is the padded call's rate counting the padding's
	// FLOPs too (Dims.FLOPs of the padded batch): its kernel's own rate.
	PaddedAllTFLOPS float64
	// Bytes is the device memory of one call: q, k, v, O and its
	// ExtraBytes (the LSE; varlen: and the cumulative lengths); for the
	// backward q, k, v, O, the LSE, dO, dQ, dK, dV and its ExtraBytes (Di,
	// the single pass's dQ accumulator; varlen: the cumulative lengths).
	VarlenBytes, PaddedBytes int64
}

// BenchVarlen times the varlen forward on sequences of lengths lens (each
// its own Nq = Nk) with hq, hkv heads of head dim dh, and the padded forward
// of the same batch, on random fp16 data: warmup untimed calls, then reps
// calls each timed with CUDA events, as BenchForward. o (its mask, scale
// and score modifiers) applies to both calls. All device memory is freed
// on return.
func (d *Device) BenchVarlen(lens []int, hq, hkv, dh int, o *Options, warmup, reps int) (VarlenBenchResult, error) {
	return d.benchVarlen(lens, hq, hkv, dh, o, warmup, reps, false)
}

// BenchVarlenBackward is BenchVarlen for the backward: the varlen backward
// (Device.BackwardVarlen's three kernels) beside Backward on the padded
// batch (its default path: at D128 on sm_80+ the single pass), each after
// one untimed forward of its own.
func (d *Device) BenchVarlenBackward(lens []int, hq, hkv, dh int, o *Options, warmup, reps int) (VarlenBenchResult, error) {
	return d.benchVarlen(lens, hq, hkv, dh, o, warmup, reps, true)
}

func (d *Device) benchVarlen(lens []int, hq, hkv, dh int, o *Options, warmup, reps int, backward bool) (VarlenBenchResult, error) {
	if reps < 1 || warmup < 0 {
		return VarlenBenchResult{}, &OptionError{Option: "reps/warmup", Value: fmt.Sprint(reps, warmup), Reason: "want reps >= 1, warmup >= 0"}
	}
	if len(lens) == 0 || slices.Min(lens) < 1 {
		return VarlenBenchResult{}, &OptionError{Option: "lens", Value: fmt.Sprint(lens), Reason: "want at least one sequence, each of at least one token"}
	}
	cu := []int{0}
	var flops float64
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
		seq := Dims{B: 1, Nq: n, Nk: n, Hq: hq, Hkv: hkv, D: dh}
		if backward {
			flops += seq.BackwardFLOPs(o != nil && o.Causal)
		} else {
			flops += seq.FLOPs(o != nil && o.Causal)
		}
	}
	vl := Varlen{CuSeqlensQ: cu, CuSeqlensK: cu}
	packed := Dims{B: 1, Nq: cu[len(lens)], Nk: cu[len(lens)], Hq: hq, Hkv: hkv, D: dh}
	if err := packed.Validate(); err != nil {
		return VarlenBenchResult{}, err
	}
	p, err := o.resolve(packed)
	if err != nil {
		return VarlenBenchResult{}, err
	}
	p.entry, p.varlen = varlenEntry, &vl
	r := VarlenBenchResult{Lens: lens}
	pass := passFwd
	if backward {
		pass = passBwd
	}
	if r.Varlen, err = d.benchProblem(p, FP16, warmup, reps, pass); err != nil {
		return VarlenBenchResult{}, err
	}
	padded := Dims{B: len(lens), Nq: slices.Max(lens), Nk: slices.Max(lens), Hq: hq, Hkv: hkv, D: dh}
	if r.Padded, err = d.bench(padded, FP16, o, warmup, reps, pass); err != nil {
		return VarlenBenchResult{}, err
	}
	r.PaddedAllTFLOPS = r.Padded.TFLOPS
	for _, x := range []struct {
		b     *BenchResult
		bytes *int64
	}{{&r.Varlen, &r.VarlenBytes}, {&r.Padded, &r.PaddedBytes}} {
		x.b.TFLOPS = flops / (x.b.MedianMs * 1e-3) / 1e12
		x.b.PeakTFLOPS = flops / (x.b.MinMs * 1e-3) / 1e12
		dm := x.b.Dims
		*x.bytes = int64(FP16.Size())*int64(2*dm.QShape().Numel()+2*dm.KVShape().Numel()) + x.b.ExtraBytes
		if backward { // and the forward's LSE, dO, dQ, dK, dV
			*x.bytes += int64(dm.LSEBytes()) + int64(FP16.Size())*int64(2*dm.QShape().Numel()+2*dm.KVShape().Numel())
		}
	}
	return r, nil
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
