package flashattn

import "github.com/goflash/goflash/internal/kernels"

// KernelTable lists the forward kernels shipped for a GPU of compute
// capability arch (e.g. 75 for a T4, 90 for an H100/H200), one per head dim
// and mask, with the tile sizes chosen for it. It needs no GPU: notebooks and
// the CLI use it to show what a T4 would run. Registers, LocalBytes and
// BinaryArch are known only once a device loads the kernel (Device.Kernel).
// An arch below 75 has no kernels and gives an empty table.
func KernelTable(arch int) []KernelInfo { return passTable(arch, false) }

// BackwardKernelTable lists the backward kernels shipped for arch: per head
// dim one "bwd_pre" kernel and a causal and non-causal "bwd_dkdv" and
// "bwd_dq" kernel (see Device.Backward).
func BackwardKernelTable(arch int) []KernelInfo { return passTable(arch, true) }

func passTable(arch int, backward bool) []KernelInfo {
	path := kernels.Path(arch)
	var out []KernelInfo
	for _, v := range kernels.Variants() {
		if v.Arch != path || (v.Pass != kernels.Fwd) != backward {
			continue
		}
		out = append(out, KernelInfo{Symbol: v.Symbol, Pass: v.Pass.String(), HeadDim: v.HeadDim, Causal: v.Causal, Path: v.Arch,
			Br: v.Br, Bc: v.Bc, Warps: v.Warps, SmemBytes: v.SmemBytes})
	}
	return out
}
