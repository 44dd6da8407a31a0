package flashattn

import "fmt"

// gpuFor returns the GPU implementation for problem d, or an error saying
// why the GPU cannot run it (wrapping ErrNoGPU, or an *UnsupportedError).
// It is replaced by the real device code as it lands.
func gpuFor(d Dims, o *Options, backward bool) (impl, string, error) {
	return nil, "", fmt.Errorf("%w: GPU backend not built yet", ErrNoGPU)
}
