package main

import "github.com/goflash/goflash/flashattn"

// gpuDevice is what demo, bench and check need from one GPU. It keeps the
// flashattn device API behind the CLI's own types.
type gpuDevice interface {
	Meta() DeviceMeta
	// Bench times one case in one direction with the kernels of arch (0:
	// the device's own, 75: the Turing path forced); failures are reported
	// in the row, not returned.
	Bench(c Case, dir string, arch int, deterministic bool, warmup, reps int) Row
	// Use selects the kernel path: 0 the device's own, 75 the Turing path
	// (forced through its PTX on a newer GPU).
	Use(arch int) error
	// HasBackward says whether the GPU backward pass exists, and if not why.
	HasBackward() (bool, string)
	// Kernels lists the kernel variant per head dim for arch (0 or 75).
	Kernels(arch int) ([]KernelRow, error)
	// Forward runs one problem on the GPU with the kernels of arch and
	// returns the result on the host.
	Forward(q, k, v *flashattn.Tensor, causal bool, arch int) (*flashattn.Result, error)
	Close()
}

// KernelRow is the kernel variant that runs for one head dim, or why none loads.
type KernelRow struct {
	flashattn.KernelInfo
	Error string `json:"error,omitempty"`
}
