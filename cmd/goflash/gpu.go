package main

import "github.com/goflash/goflash/flashattn"

// gpuDevice is what demo, bench and check need from one GPU. It keeps the
// flashattn device API behind the CLI's own types.
type gpuDevice interface {
	Meta() DeviceMeta
	// Bench times one case in one direction with the kernels of path (0:
	// the device's own, 75: the Turing path forced); failures are reported
	// in the row, not returned.
	Bench(c Case, dir string, path int, deterministic bool, mods scoreMods, warmup, reps int) Row
	// Use selects the kernel path: 0 the device's own, 75 the Turing path
	// (forced through its PTX on a newer GPU).
	Use(path int) error
	// HasBackward says whether the GPU backward pass exists, and if not why.
	HasBackward() (bool, string)
	// Kernels lists the kernel variant per head dim for path (0 or 75).
	Kernels(path int) ([]KernelRow, error)
	// Forward runs one problem on the GPU with the kernels of path and
	// returns the result on the host.
	Forward(q, k, v *flashattn.Tensor, causal bool, path int) (*flashattn.Result, error)
	// Backward runs the backward pass of one problem on the GPU with the
	// kernels of path, from a forward result on the host.
	Backward(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool, path int) (*flashattn.Grads, error)
	Close()
}

// KernelRow is the kernel variant that runs for one head dim, or why none loads.
type KernelRow struct {
	flashattn.KernelInfo
	Error string `json:"error,omitempty"`
}
