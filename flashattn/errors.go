package flashattn

import (
	"errors"
	"fmt"

	"github.com/goflash/goflash/internal/cuda"
)

// ShapeError reports a tensor whose shape does not fit the problem: it names
// the argument, the dimension and the value found.
type ShapeError struct {
	Arg  string // "q", "k", "v", "out", "dOut", ...
	Dim  string // "B", "N", "H", "D", "Hq/Hkv", ...
	Got  int
	Want string // what was expected, in words ("== 64", ">= 1", "a multiple of 4")
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("flashattn: %s: dimension %s is %d, want %s", e.Arg, e.Dim, e.Got, e.Want)
}

// DataError reports a nil tensor, a nil or too short data slice, or strides
// that do not fit the data.
type DataError struct {
	Arg    string
	Len    int // len(data) found
	Need   int // elements the shape and strides reach
	Reason string
}

func (e *DataError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("flashattn: %s: %s", e.Arg, e.Reason)
	}
	return fmt.Sprintf("flashattn: %s: data has %d elements, shape and strides need %d", e.Arg, e.Len, e.Need)
}

// OptionError reports an invalid option value, such as a non-finite scale.
type OptionError struct {
	Option string
	Value  string
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("flashattn: option %s = %s: %s", e.Option, e.Value, e.Reason)
}

// UnsupportedError reports a problem a backend cannot run, such as a head
// dimension the GPU kernels were not built for.
type UnsupportedError struct {
	Backend Backend
	Feature string // "head dim", "compute capability", ...
	Value   string
	Reason  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("flashattn: backend %s does not support %s %s: %s", e.Backend, e.Feature, e.Value, e.Reason)
}

// ErrNoGPU is returned (wrapped) when the GPU backend is asked for explicitly
// and no usable CUDA driver or device is present.
var ErrNoGPU = errors.New("flashattn: no usable NVIDIA GPU")

// ErrNoKernels is wrapped, with ErrNoGPU, by OpenDevice and every GPU call
// of a program built with the goflash_nogpu tag: such a build embeds no
// kernel images (internal/kernels), so it runs the CPU backends alone, and
// Auto says why in Result.Reason. The CPU backends are the same in every
// build.
var ErrNoKernels = errors.New("built without GPU kernels (goflash_nogpu)")

// ErrOutOfMemory is wrapped by a GPU call that failed because the device
// is out of memory: the problem is too large for it, not a fault.
var ErrOutOfMemory = cuda.ErrNoMemory
