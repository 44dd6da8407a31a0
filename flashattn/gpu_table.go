package flashattn

import "github.com/goflash/goflash/internal/kernels"

// KernelTable lists the forward kernels shipped for a GPU of compute
// capability arch (e.g. 75 for a T4, 90 for an H100/H200), one per head dim
// and mask, with the tile sizes chosen for it. It needs no GPU: notebooks and
// the CLI use it to show what a T4 would run. Registers, LocalBytes and
// BinaryArch are known only once a device loads the kernel (Device.Kernels).
// An arch below 75 has no kernels and gives an empty table. It lists the
// fp16 kernels (as BackwardKernelTable does): the sm_80 path's bf16 kernels
// (UploadAs(t, BF16)) have the same tiles, under the fp16 symbol with _bf16 after
// d{D}, e.g. fa2_fwd_sm80_d64_bf16_causal.
func KernelTable(arch int) []KernelInfo {
	// The plans of a device of that arch (its path, the shipped kernels,
	// no Hopper forward): what Device.Kernel answers there.
	c := planDevice{path: kernels.Path(arch), smemOptin: kernels.BaseSmemBytes}
	var out []KernelInfo
	for _, d := range tableHeadDims() {
		for _, causal := range []bool{false, true} {
			if pl, err := planOf(c, planRequest{op: opKernel, p: queryProblem(d, causal), dt: FP16}); err == nil {
				out = append(out, kernelInfo(pl.kernels[0]))
			}
		}
	}
	return out
}

// HopperKernelTable lists the Hopper kernels (Path 90: wgmma and TMA, SASS
// for sm_90a alone), which an H100/H200 runs unless Device.ForcePath(80):
// the forward (persistent) for dense fp16 and bf16 forwards at
// HopperHeadDims, plain ("fwd"; causal ones above SM80CausalMaxNk keys) and
// with a window, softcap or ALiBi ("fwd_mod*"), and the backward's single
// pass ("bwd_pre", "bwd_dkdvq" or with Options.Deterministic "bwd_dkdvqdet",
// "bwd_dqconv") for dense unmodified fp16 and bf16 backwards at the same
// head dims. KernelTable(90) and BackwardKernelTable(90) list the sm_80
// path's, which it runs for everything else.
func HopperKernelTable() []KernelInfo {
	var out []KernelInfo
	for _, v := range kernels.SM90AVariants() {
		out = append(out, kernelInfo(v))
	}
	return out
}

// HopperHeadDims lists, ascending, the head dims of the Hopper forward.
func HopperHeadDims() []int {
	return kernels.HeadDims(kernels.Key{Stage: kernels.Fwd, Arch: kernels.SM90A})
}

// BackwardKernelTable lists the backward kernels shipped for arch: per head
// dim one "bwd_pre" kernel and a causal and non-causal "bwd_dkdv" and
// "bwd_dq" kernel, and on the sm_80 path, for the head dims with FA2's
// single pass, a causal and non-causal "bwd_dkdvq" (and for a Large set
// "bwd_dkdvqdet", its ordered twin, Options.Deterministic) and one
// "bwd_dqconv" kernel (see Device.Backward and Device.Kernels). A head dim may list
// two single-pass sets: the Large one (symbols ..._large, more than 99 KiB
// of shared memory per CTA) runs where the device's opt-in limit fits it
// (A100: 163 KiB, H100/H200: 227 KiB), the other (<= 99 KiB) elsewhere
// (sm_86/89: D 128's and D 256's base single pass).
func BackwardKernelTable(arch int) []KernelInfo {
	path := kernels.Path(arch)
	var out []KernelInfo
	for _, v := range kernels.Variants() {
		// The plain backward's kernels, fp16 (the modified and varlen ones
		// and decode are in neither table).
		if v.Arch == path && v.Stage != kernels.Fwd && v.Stage != kernels.Decode && v.Mods == 0 && !v.Packed && !v.BF16 {
			out = append(out, kernelInfo(v))
		}
	}
	return out
}

// KernelInfo describes a kernel variant: its tiles from the table, and once a
// device has loaded it (Device.Kernels) what the driver made of it.
type KernelInfo struct {
	Symbol     string `json:"symbol"`
	Pass       string `json:"pass"` // "fwd" ("fwd_mod", "fwd_varlen", "fwd_short": its siblings), or a backward step: "bwd_pre", "bwd_dkdv", "bwd_dq"
	HeadDim    int    `json:"head_dim"`
	Causal     bool   `json:"causal"`
	Path       int    `json:"path"` // 75: Turing code (m16n8k8); 80: sm_80+ code (m16n8k16, cp.async); 90: the Hopper kernels (wgmma, TMA)
	Br         int    `json:"br"`   // query rows per CTA (bwd_dkdv: query rows per step)
	Bc         int    `json:"bc"`   // key rows per step (bwd_dkdv: key rows per CTA)
	Warps      int    `json:"warps"`
	SmemBytes  int    `json:"smem_bytes"`  // dynamic shared memory per CTA
	Registers  int    `json:"registers"`   // per thread, as loaded
	LocalBytes int    `json:"local_bytes"` // local memory per thread (register spills or stack)
	// BinaryArch is the machine code the function runs as (90 on an H200);
	// FromPTX says it was compiled by the driver's JIT from PTX (forced
	// Turing path) rather than taken as SASS from the fatbin.
	BinaryArch int  `json:"binary_arch"`
	FromPTX    bool `json:"from_ptx"`
	// Rung is the kernel-ladder rung 1-4 (Ladder) of a teaching kernel, 0
	// for a shipped one.
	Rung int `json:"rung,omitempty"`
	// DType is the element type of q, k, v and O (and dO and the
	// gradients): FP16, or BF16 for the sm_80 path's bf16 kernels and the
	// Hopper kernels' bf16 twins.
	DType DType `json:"dtype,omitempty"`
	// Large: the kernel needs more than 99 KiB of shared memory per CTA and
	// runs only on devices whose opt-in limit fits it (BackwardKernelTable).
	Large bool `json:"large,omitempty"`
	// SM80CausalMaxNk (a causal Hopper forward, Path 90): calls of at most
	// this many keys run the sm_80 kernel instead, which is faster there.
	SM80CausalMaxNk int `json:"sm80_causal_max_nk,omitempty"`
	// Persistent (the Hopper forwards): one CTA per SM walks the (query
	// block, batch, head) tiles, instead of one CTA per tile.
	Persistent bool `json:"persistent,omitempty"`
	// MaxNq (Pass "fwd_short", a Hopper forward for short calls): calls of at
	// most this many query rows run it instead of the "fwd" kernel.
	MaxNq int `json:"max_nq,omitempty"`
}

// kernelInfo is the one conversion from the generated table's row.
func kernelInfo(v kernels.Variant) KernelInfo {
	return KernelInfo{Symbol: v.Symbol, Pass: v.Pass(), HeadDim: v.HeadDim, Causal: v.Causal, Path: v.Arch,
		Br: v.Br, Bc: v.Bc, Warps: v.Warps, SmemBytes: v.SmemBytes, Rung: v.Rung, DType: dtypeOf(v), Large: v.Large,
		SM80CausalMaxNk: v.SM80CausalMaxNk, Persistent: v.Persistent, MaxNq: v.MaxNq}
}

func dtypeOf(v kernels.Variant) DType {
	if v.BF16 {
		return BF16
	}
	return FP16
}
