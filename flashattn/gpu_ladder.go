package flashattn

import (
	"fmt"

	"github.com/goflash/goflash/internal/kernels"
)

// LadderStep is one rung of the kernel ladder of tutorial chapter 6: a real
// CUDA forward kernel, shipped in the fatbin like the production kernels, one
// idea more than the rung below it.
type LadderStep struct {
	Rung   int
	Name   string
	Idea   string // what this rung adds to the one below
	Source string // the CUDA source, relative to the repository root
	// Kernels are the rung's kernels and tiles (no GPU needed; Registers
	// and the like are known once a device loads one). The last rung's are
	// the shipped forward kernels of both kernel paths, KernelTable(75)
	// then KernelTable(80) (KernelInfo.Path tells them apart).
	Kernels []KernelInfo
}

// ladder is the one list of rungs; rungs 1-4 have the kernels of
// kernels/ladder/, the last is the shipped forward kernel.
var ladder = []LadderStep{
	{Rung: 1, Name: "scalar", Idea: "FA2 forward in plain CUDA: one thread per query row, fp32 math, K and V read from global memory", Source: "kernels/ladder/rung1_scalar.cuh"},
	{Rung: 2, Name: "shared memory", Idea: "the CTA copies each block of Bc keys (K_j, V_j) to shared memory once, and every row reads it there", Source: "kernels/ladder/rung2_smem.cuh"},
	{Rung: 3, Name: "tensor cores", Idea: "a warp computes S = Q K^T and O += P V for 16 rows with mma.sync m16n8k8; online softmax per block of keys, on the mma fragments", Source: "kernels/ladder/rung3_mma.cuh"},
	{Rung: 4, Name: "ldmatrix + swizzle", Idea: "tiles stored in XOR-swizzled 16-byte chunks, fragments loaded by ldmatrix (.trans for V): no bank conflicts, no 16-bit shuffling", Source: "kernels/ladder/rung4_ldmatrix.cuh"},
	{Rung: 5, Name: "shipped", Idea: "copies overlap the math (sm_80+: cp.async double buffering; sm_75, which has no cp.async: the next K/V block prefetched into registers) and tuned tiles: the kernel Forward runs (on an H100/H200 with ForcePath(80): Forward's default there is the Hopper kernel, kernels/fwd_sm90.cuh, another family)", Source: "kernels/fwd.cuh"},
}

// Ladder lists the rungs of the kernel ladder, from the simplest kernel to
// the shipped one (the last). It needs no GPU.
func Ladder() []LadderStep {
	out := append([]LadderStep(nil), ladder...)
	for _, v := range kernels.LadderVariants() {
		out[v.Rung-1].Kernels = append(out[v.Rung-1].Kernels, kernelInfo(v))
	}
	last := &out[len(out)-1]
	last.Kernels = append(KernelTable(75), KernelTable(80)...)
	return out
}

// UseRung makes Forward (and Bench, Kernels and SupportedHeadDims of
// OpForward) use the kernels of ladder rung 1..len(Ladder()); the last
// rung, the default, is the shipped kernel. The rung kernels run on the
// kernel path in use (ForcePath) and
// take the same problems as the shipped ones, for their head dims. The
// backward pass is not affected.
func (d *Device) UseRung(rung int) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	switch {
	case rung == len(ladder):
		d.rung = 0
	case rung >= 1 && rung <= kernels.LadderRungs:
		d.rung = rung
	default:
		return &UnsupportedError{Backend: GPU, Feature: "ladder rung", Value: fmt.Sprint(rung),
			Reason: fmt.Sprintf("the kernel ladder has rungs 1 to %d", len(ladder))}
	}
	return nil
}

// Rung returns the ladder rung Forward runs (len(Ladder()): the shipped kernel).
func (d *Device) Rung() int {
	if d == nil {
		return len(ladder)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rungInUse()
}
