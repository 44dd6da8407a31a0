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
// Causal (bottom-right per sequence) and Scale; windows, softcap and ALiBi
// are an *UnsupportedError. The LSE is (1, Hq, total_q), as ForwardVarlen's.
func (d *Device) ForwardVarlen(q, k, v *DeviceTensor, vl Varlen, o *Options) (*DeviceResult, error) {
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
		floats(dm.QShape().Numel(), dm.LSELen())+varlenHostBytes(c)); err != nil {
		return nil, err
	}
	out, lse := newOutput(dm.QShape()), newBuffer(dm.LSELen())
	kern, err := d.forwardHost(c.p, q, k, v, out, lse)
	if err != nil {
		return nil, err
	}
	return &Result{Dims: dm, Out: out, LSE: lse, Backend: GPU, Reason: d.reason(kern)}, nil
}

// varlenCuLens is vl's cumulative lengths as the FwdVarlen kernels read
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

// maxSeqlenQ is the longest sequence's query rows: the grid's row blocks.
func (vl Varlen) maxSeqlenQ() int {
	m := 0
	for s := 0; s < vl.Seqs(); s++ {
		m = max(m, vl.CuSeqlensQ[s+1]-vl.CuSeqlensQ[s])
	}
	return m
}

// varlenHostBytes is what the GPU varlen path allocates on the host beyond
// its outputs: the packed problem's 16-bit copies (gpuImpl.hostBytes) and
// the int32 cumulative lengths.
func varlenHostBytes(c varlenCall) float64 {
	return gpuImpl{}.hostBytes(c.p, nil, false) + 4*float64(len(varlenCuLens(c.vl)))
}

// varlenDeviceBytes is the device memory a varlen forward allocates beyond
// its inputs and outputs: the LSE and the cumulative lengths.
func varlenDeviceBytes(p problem) int64 {
	return 4 * int64(p.LSELen()+len(varlenCuLens(*p.varlen)))
}

// uploadVarlen uploads vl's cumulative lengths for op and sets its grid to
// the longest sequence's row blocks by Seqs*Hq CTAs (those past a shorter
// sequence's rows exit at once); d.mu is held.
func (op *fwdOp) uploadVarlen(vl Varlen) error {
	d, dims := op.d, op.res.Dims
	// One CTA row per (sequence, head): the grid check of Seqs batches.
	if err := d.checkGrid(Dims{B: vl.Seqs(), Nq: dims.Nq, Nk: dims.Nk, Hq: dims.Hq, Hkv: dims.Hkv, D: dims.D}); err != nil {
		return err
	}
	cu := varlenCuLens(vl)
	var err error
	if op.cu, err = d.ctx.Alloc(4 * len(cu)); err != nil {
		return fmt.Errorf("flashattn: allocating the cumulative sequence lengths on %s: %w", d.info, err)
	}
	if err := cuda.CopyToDevice(op.cu, cu); err != nil {
		return err
	}
	op.seqs = vl.Seqs()
	op.f.nq, op.f.bh = vl.maxSeqlenQ(), vl.Seqs()*dims.Hq
	return nil
}

// VarlenBenchResult is BenchVarlen's timing of one batch of sequences,
// packed (Device.ForwardVarlen) and padded to the longest (Forward on
// (Seqs, max length, H, D)). The TFLOPS of both count the real tokens only:
// the sum over sequences of Dims.FLOPs of each alone.
type VarlenBenchResult struct {
	Lens           []int
	Varlen, Padded BenchResult
	// PaddedAllTFLOPS is the padded call's rate counting the padding's
	// FLOPs too (Dims.FLOPs of the padded batch): its kernel's own rate.
	PaddedAllTFLOPS float64
	// Bytes is the device memory of one call: q, k, v, O and its
	// ExtraBytes (the LSE; varlen: and the cumulative lengths).
	VarlenBytes, PaddedBytes int64
}

// BenchVarlen times the varlen forward on sequences of lengths lens (each
// its own Nq = Nk) with hq, hkv heads of head dim dh, and the padded forward
// of the same batch, on random fp16 data: warmup untimed calls, then reps
// calls each timed with CUDA events, as BenchForward. Only o.Causal and
// o.Scale are used. All device memory is freed on return.
func (d *Device) BenchVarlen(lens []int, hq, hkv, dh int, o *Options, warmup, reps int) (VarlenBenchResult, error) {
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
		flops += Dims{B: 1, Nq: n, Nk: n, Hq: hq, Hkv: hkv, D: dh}.FLOPs(o != nil && o.Causal)
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
	if r.Varlen, err = d.benchProblem(p, FP16, warmup, reps, false); err != nil {
		return VarlenBenchResult{}, err
	}
	padded := Dims{B: len(lens), Nq: slices.Max(lens), Nk: slices.Max(lens), Hq: hq, Hkv: hkv, D: dh}
	if r.Padded, err = d.BenchForward(padded, o, warmup, reps); err != nil {
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
	}
	return r, nil
}
