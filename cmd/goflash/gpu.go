package main

import "github.com/goflash/goflash/flashattn"

// gpuDevice is what demo, bench and check need from one GPU. It keeps the
// flashattn device API behind the CLI's own types.
type gpuDevice interface {
	Meta() DeviceMeta
	// Bench times one case in one direction with the kernels of path (0:
	// the device's own, 75: the Turing path forced, 80: the sm_80 path,
	// forced on an sm_90 GPU) on inputs of element type dt; failures (bf16
	// on the Turing path: unsupported) are reported in the row, not
	// returned. The row's Impl is gpuImplName's.
	Bench(c Case, dir string, path int, deterministic bool, dt flashattn.DType, mods scoreMods, warmup, reps int) Row
	// Use selects the kernel path: 0 the device's own, 75 the Turing path
	// (forced through its PTX on a newer GPU), 80 the sm_80 (mma.sync)
	// kernels (on an sm_90 GPU instead of its Hopper forward; elsewhere
	// sm_80+ devices' own).
	Use(path int) error
	// UseRung makes Forward and Bench's forward on path run kernel-ladder
	// rung rung (1..len(flashattn.Ladder())), compiled with NVRTC from src
	// when src is not empty; restore puts the shipped kernels back.
	UseRung(path, rung int, src string) (restore func(), err error)
	// KernelStats is what the driver made of the forward kernel that case c
	// runs now: registers, shared memory, occupancy.
	KernelStats(c Case) (flashattn.KernelStats, error)
	// HasBackward says whether the GPU backward pass exists, and if not why.
	HasBackward() (bool, string)
	// Kernels lists the kernel variant per head dim for path (0 or 75).
	Kernels(path int) ([]KernelRow, error)
	// Forward runs one problem on the GPU with the kernels of path, its
	// inputs rounded to dt, and returns the result on the host.
	Forward(q, k, v *flashattn.Tensor, causal bool, path int, dt flashattn.DType) (*flashattn.Result, error)
	// Backward runs the backward pass of one problem on the GPU with the
	// kernels of path in dt, from a forward result on the host.
	Backward(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool, path int, dt flashattn.DType) (*flashattn.Grads, error)
	Close()
}

// KernelRow is the kernel variant that runs for one head dim, or why none loads.
type KernelRow struct {
	flashattn.KernelInfo
	Error string `json:"error,omitempty"`
}

// gpuImplName is the implementation name of the rows that kernel path path
// times on a device of compute capability arch: the forced sm_75 path's
// own, the sm_80 path's own on an sm_90 GPU (where the default runs the
// Hopper forward; elsewhere path 80 is the default), else implGPU.
func gpuImplName(path, arch int) string {
	switch {
	case path == 75:
		return implGPUSM75
	case path == 80 && arch == 90:
		return implGPUSM80
	}
	return implGPU
}
