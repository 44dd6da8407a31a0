package flashattn

import (
	"fmt"
	"slices"
)

// The Device methods below are the first names of what SupportedHeadDims,
// Kernels, Bench, UploadAs, UploadBits and UploadResultAs answer for every
// op and dtype; each runs its replacement.

// HeadDims lists the head dims the kernel path in use has forward kernels
// for (a ladder rung's while one is in use).
//
// Deprecated: use SupportedHeadDims(OpForward, FP16, nil).
func (d *Device) HeadDims() []int { return d.SupportedHeadDims(OpForward, FP16, nil) }

// KVCacheHeadDims lists the head dims the kernel path in use has decode
// kernels for (ForwardKVCache).
//
// Deprecated: use SupportedHeadDims(OpKVCache, FP16, nil).
func (d *Device) KVCacheHeadDims() []int { return d.SupportedHeadDims(OpKVCache, FP16, nil) }

// PackedModHeadDims lists the head dims at which varlen calls of element
// type dt with a window, softcap or ALiBi run here.
//
// Deprecated: use SupportedHeadDims(OpVarlenForward, dt, o) with o's
// modifiers.
func (d *Device) PackedModHeadDims(dt DType) []int {
	return d.SupportedHeadDims(OpVarlenForward, dt, windowed())
}

// ModBackwardHeadDims lists the head dims at which Backward of element type
// dt with a window, softcap or ALiBi runs here, and BackwardVarlen with or
// without them.
//
// Deprecated: use SupportedHeadDims(OpBackward, dt, o) with o's modifiers,
// or SupportedHeadDims(OpVarlenBackward, dt, o).
func (d *Device) ModBackwardHeadDims(dt DType) []int {
	return d.SupportedHeadDims(OpBackward, dt, windowed())
}

// BackwardHeadDims lists the head dims the kernel path in use has backward
// kernels for on this device.
//
// Deprecated: use SupportedHeadDims(OpBackward, FP16, nil).
func (d *Device) BackwardHeadDims() []int { return d.SupportedHeadDims(OpBackward, FP16, nil) }

// DeterministicBackwardHeadDims lists the head dims Options.Deterministic
// runs on the GPU here.
//
// Deprecated: use SupportedHeadDims(OpBackward, FP16,
// &Options{Deterministic: true}).
func (d *Device) DeterministicBackwardHeadDims() []int {
	return d.SupportedHeadDims(OpBackward, FP16, &Options{Deterministic: true})
}

// RawBackwardHeadDims lists the head dims of the raw backward
// (NewRawBackward).
//
// Deprecated: use SupportedHeadDims(OpRawBackward, FP16, nil).
func (d *Device) RawBackwardHeadDims() []int { return d.SupportedHeadDims(OpRawBackward, FP16, nil) }

// windowed is options with a window: what the modified kernels run.
func windowed() *Options { return &Options{Window: &Window{Left: 0, Right: -1}} }

// Kernel returns the kernel Forward runs for fp16 dims (causal or not),
// loading it on first use.
//
// Deprecated: use Kernels(OpForward, dims, FP16, &Options{Causal: causal}).
func (d *Device) Kernel(dims Dims, causal bool) (KernelInfo, error) {
	return firstKernel(d.Kernels(OpForward, dims, FP16, &Options{Causal: causal}))
}

// KernelStats returns the stats of the kernel Forward runs for fp16 dims
// (causal or not): its tile, registers, shared memory and occupancy.
//
// Deprecated: use Kernels(OpForward, dims, FP16, &Options{Causal: causal}).
func (d *Device) KernelStats(dims Dims, causal bool) (KernelStats, error) {
	return firstStats(d.Kernels(OpForward, dims, FP16, &Options{Causal: causal}))
}

// BackwardKernels returns the three kernels Backward runs for fp16 dims by
// default.
//
// Deprecated: use Kernels(OpBackward, dims, FP16, &Options{Causal: causal}).
func (d *Device) BackwardKernels(dims Dims, causal bool) ([]KernelInfo, error) {
	return kernelInfos(d.Kernels(OpBackward, dims, FP16, &Options{Causal: causal}))
}

// BackwardKernelsDeterministic is BackwardKernels with Options.Deterministic.
//
// Deprecated: use Kernels(OpBackward, dims, FP16, &Options{Causal: causal,
// Deterministic: true}).
func (d *Device) BackwardKernelsDeterministic(dims Dims, causal bool) ([]KernelInfo, error) {
	return kernelInfos(d.Kernels(OpBackward, dims, FP16, &Options{Causal: causal, Deterministic: true}))
}

// firstKernel is the KernelInfo of the first of ks.
func firstKernel(ks []KernelStats, err error) (KernelInfo, error) {
	s, err := firstStats(ks, err)
	return s.KernelInfo, err
}

// firstStats is the first of ks, the zero KernelStats for none.
func firstStats(ks []KernelStats, err error) (KernelStats, error) {
	if len(ks) == 0 {
		return KernelStats{}, err
	}
	return ks[0], err
}

// kernelInfos is the KernelInfo of each of ks (nil for none).
func kernelInfos(ks []KernelStats, err error) ([]KernelInfo, error) {
	if err != nil {
		return nil, err
	}
	out := make([]KernelInfo, len(ks))
	for i, k := range ks {
		out[i] = k.KernelInfo
	}
	return out, nil
}

// BenchForward times the fp16 forward kernel for dims.
//
// Deprecated: use Bench(OpForward, dims, FP16, o, BenchConfig{Warmup:
// warmup, Reps: reps}).
func (d *Device) BenchForward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpForward, dims, FP16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchForwardBF16 is BenchForward for the bf16 kernels.
//
// Deprecated: use Bench(OpForward, dims, BF16, o, BenchConfig{Warmup:
// warmup, Reps: reps}).
func (d *Device) BenchForwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpForward, dims, BF16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchBackward times the fp16 backward pass for dims.
//
// Deprecated: use Bench(OpBackward, dims, FP16, o, BenchConfig{Warmup:
// warmup, Reps: reps}).
func (d *Device) BenchBackward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpBackward, dims, FP16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchBackwardBF16 is BenchBackward for the bf16 kernels.
//
// Deprecated: use Bench(OpBackward, dims, BF16, o, BenchConfig{Warmup:
// warmup, Reps: reps}).
func (d *Device) BenchBackwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpBackward, dims, BF16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchForwardBackward times an fp16 forward and then its backward as one
// call.
//
// Deprecated: use Bench(OpForwardBackward, dims, FP16, o,
// BenchConfig{Warmup: warmup, Reps: reps}).
func (d *Device) BenchForwardBackward(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpForwardBackward, dims, FP16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchForwardBackwardBF16 is BenchForwardBackward for the bf16 kernels.
//
// Deprecated: use Bench(OpForwardBackward, dims, BF16, o,
// BenchConfig{Warmup: warmup, Reps: reps}).
func (d *Device) BenchForwardBackwardBF16(dims Dims, o *Options, warmup, reps int) (BenchResult, error) {
	return d.Bench(OpForwardBackward, dims, BF16, o, BenchConfig{Warmup: warmup, Reps: reps})
}

// BenchKVCache times one fp16 decode call of q (B, Nq, Hq, D) against a
// cache of dims.Nk entries per sequence, contiguous for pageSize 0, else
// paged in blocks of pageSize.
//
// Deprecated: use Bench(OpKVCache, dims, FP16, o, BenchConfig{Warmup:
// warmup, Reps: reps, PageSize: pageSize}).
func (d *Device) BenchKVCache(dims Dims, pageSize int, o *Options, warmup, reps int) (DecodeBenchResult, error) {
	return decodeResult(d.Bench(OpKVCache, dims, FP16, o, BenchConfig{Warmup: warmup, Reps: reps, PageSize: pageSize}))
}

func decodeResult(r BenchResult, err error) (DecodeBenchResult, error) {
	return DecodeBenchResult{r}, err
}

// VarlenBenchResult is BenchVarlen's timing of one batch of sequences,
// packed (Device.ForwardVarlen) and padded to the longest (Forward on
// (Seqs, max length, H, D)), or BenchVarlenBackward's (BackwardVarlen and
// Backward). The TFLOPS of both count the real tokens only: the sum over
// sequences of Dims.FLOPs (BackwardFLOPs) of each alone.
//
// Deprecated: Bench times the varlen ops (OpVarlenForward,
// OpVarlenBackward) and the padded batch (OpForward, OpBackward).
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

// BenchVarlen times the fp16 varlen forward on sequences of lengths lens
// (each its own Nq = Nk) with hq, hkv heads of head dim dh, and the padded
// forward of the same batch.
//
// Deprecated: use Bench(OpVarlenForward, ...) with BenchConfig.Varlen, and
// Bench(OpForward, ...) on the padded batch.
func (d *Device) BenchVarlen(lens []int, hq, hkv, dh int, o *Options, warmup, reps int) (VarlenBenchResult, error) {
	return d.benchVarlen(lens, hq, hkv, dh, o, warmup, reps, OpVarlenForward)
}

// BenchVarlenBackward is BenchVarlen for the backward.
//
// Deprecated: use Bench(OpVarlenBackward, ...) with BenchConfig.Varlen,
// and Bench(OpBackward, ...) on the padded batch.
func (d *Device) BenchVarlenBackward(lens []int, hq, hkv, dh int, o *Options, warmup, reps int) (VarlenBenchResult, error) {
	return d.benchVarlen(lens, hq, hkv, dh, o, warmup, reps, OpVarlenBackward)
}

// benchVarlen is BenchVarlen (op OpVarlenForward) and BenchVarlenBackward:
// Bench of the packed sequences and of the padded batch.
func (d *Device) benchVarlen(lens []int, hq, hkv, dh int, o *Options, warmup, reps int, op Op) (VarlenBenchResult, error) {
	if len(lens) == 0 || slices.Min(lens) < 1 {
		return VarlenBenchResult{}, &OptionError{Option: "lens", Value: fmt.Sprint(lens), Reason: "want at least one sequence, each of at least one token"}
	}
	cu := []int{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	packed := Dims{B: 1, Nq: cu[len(lens)], Nk: cu[len(lens)], Hq: hq, Hkv: hkv, D: dh}
	vl := Varlen{CuSeqlensQ: cu, CuSeqlensK: cu}
	r := VarlenBenchResult{Lens: lens}
	var err error
	if r.Varlen, err = d.Bench(op, packed, FP16, o, BenchConfig{Warmup: warmup, Reps: reps, Varlen: vl}); err != nil {
		return VarlenBenchResult{}, err
	}
	dense := OpForward
	if op == OpVarlenBackward {
		dense = OpBackward
	}
	padded := Dims{B: len(lens), Nq: slices.Max(lens), Nk: slices.Max(lens), Hq: hq, Hkv: hkv, D: dh}
	if r.Padded, err = d.Bench(dense, padded, FP16, o, BenchConfig{Warmup: warmup, Reps: reps}); err != nil {
		return VarlenBenchResult{}, err
	}
	r.PaddedAllTFLOPS = r.Padded.TFLOPS
	r.Padded.setRate(r.Varlen.TFLOPS * r.Varlen.MedianMs * 1e9) // the real tokens' FLOPs
	r.VarlenBytes, r.PaddedBytes = r.Varlen.deviceBytes(), r.Padded.deviceBytes()
	return r, nil
}

// deviceBytes is the device memory of one fp16 call r timed: q, k, v, O
// and its ExtraBytes, and for a backward the forward's LSE, dO, dQ, dK and
// dV too.
func (r BenchResult) deviceBytes() int64 {
	dm := r.Dims
	n := int64(FP16.Size())*int64(2*dm.QShape().Numel()+2*dm.KVShape().Numel()) + r.ExtraBytes
	if r.Backward {
		n += int64(dm.LSEBytes()) + int64(FP16.Size())*int64(2*dm.QShape().Numel()+2*dm.KVShape().Numel())
	}
	return n
}

// UploadBF16 rounds t to bfloat16 on the host and copies it to the device.
//
// Deprecated: use UploadAs(t, BF16).
func (d *Device) UploadBF16(t *Tensor) (*DeviceTensor, error) { return d.UploadAs(t, BF16) }

// UploadFP16 copies dense BSHD binary16 bits of shape s to the device.
//
// Deprecated: use UploadBits(s, FP16, bits).
func (d *Device) UploadFP16(s Shape, bits []uint16) (*DeviceTensor, error) {
	return d.UploadBits(s, FP16, bits)
}

// UploadResult copies a forward result computed elsewhere to the device
// for an fp16 Backward.
//
// Deprecated: use UploadResultAs(dims, out, lse, FP16).
func (d *Device) UploadResult(dims Dims, out *Tensor, lse []float32) (*DeviceResult, error) {
	return d.UploadResultAs(dims, out, lse, FP16)
}

// UploadResultBF16 is UploadResult for a bf16 Backward.
//
// Deprecated: use UploadResultAs(dims, out, lse, BF16).
func (d *Device) UploadResultBF16(dims Dims, out *Tensor, lse []float32) (*DeviceResult, error) {
	return d.UploadResultAs(dims, out, lse, BF16)
}
