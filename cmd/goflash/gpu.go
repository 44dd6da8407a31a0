package main

import (
	"fmt"

	"github.com/goflash/goflash/flashattn"
)

// gpuDevice is what bench and check need from one GPU. It hides the
// flashattn device API behind the CLI's own types.
type gpuDevice interface {
	Meta() DeviceMeta
	// Bench times one case in one direction; failures are reported in the row.
	Bench(c Case, dir string, forceArch int, deterministic bool, warmup, reps int) Row
	HasBackward() bool
	Close()
}

// openGPU opens GPU ordinal, or says why there is none.
func openGPU(ordinal int) (gpuDevice, error) {
	return nil, fmt.Errorf("%w: the GPU device API is not in this build yet", flashattn.ErrNoGPU)
}
