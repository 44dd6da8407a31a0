package cuda

import (
	"errors"
	"fmt"
)

// ErrNoDriver is wrapped by every error caused by a missing or unusable
// CUDA driver library (libcuda.so.1, nvcuda.dll).
var ErrNoDriver = errors.New("cuda: no usable CUDA driver")

// ErrNoDevice is wrapped by errors that say the driver found no device, or
// no device with the ordinal asked for.
var ErrNoDevice = errors.New("cuda: no CUDA device")

// ErrNoMemory is wrapped by errors that say the device is out of memory
// (CUDA_ERROR_OUT_OF_MEMORY), so callers can tell a problem too large for
// the device from a fault.
var ErrNoMemory = errors.New("cuda: out of device memory")

// ErrContextLost is wrapped by the error of a kernel fault (an illegal
// address or instruction, a trap, a launch failure) and by every later call
// on that context. The driver keeps such a fault for the rest of the
// process: on driver 580 (H200) cuDevicePrimaryCtxReset and
// Release succeed, but the next cuDevicePrimaryCtxRetain of that GPU still
// answers 700, as CUDA's documentation of CUDA_ERROR_ILLEGAL_ADDRESS says
// ("the process must be terminated and relaunched"). Other GPUs are not
// affected.
var ErrContextLost = errors.New("cuda: context lost to a kernel fault (no more work on this GPU in this process: restart the process)")

// ErrClosed is returned by methods called on a closed Context, or on a
// buffer, module, stream or event that was already released.
var ErrClosed = errors.New("cuda: use of a released context or object")

// Result is a CUresult code.
type Result int32

// CUresult codes the package inspects by value.
const (
	Success            Result = 0
	ErrOutOfMemory     Result = 2
	ErrNotInitialized  Result = 3
	ErrStubLibrary     Result = 34
	ErrInsufficientDrv Result = 35
	ErrDevUnavailable  Result = 46
	ErrNoDeviceCode    Result = 100
	ErrInvalidDevice   Result = 101
	ErrECCUncorrected  Result = 214 // an uncorrectable ECC error: the context is unusable after it
	ErrInvalidImage    Result = 200 // the image's format is one this driver does not know
	ErrNoBinaryForGPU  Result = 209
	ErrInvalidPTX      Result = 218
	ErrUnsupportedPTX  Result = 222 // PTX of a newer ISA than this driver's JIT
	ErrIllegalAddress  Result = 700 // the first of the faults that leave a context unusable
	ErrLaunchTimeout   Result = 702
	ErrAssert          Result = 710
	ErrStackError      Result = 714 // hardware stack error
	ErrIllegalInstr    Result = 715
	ErrMisaligned      Result = 716
	ErrAddressSpace    Result = 717
	ErrInvalidPC       Result = 718
	ErrLaunchFailed    Result = 719
	ErrSysNotReady     Result = 802
	ErrSysDrvMismatch  Result = 803
	ErrCompatNotSupp   Result = 804
)

// Error is a failed driver call: the entry point, its CUresult, and the
// driver's name and description of that result.
type Error struct {
	Func    string // driver entry point, e.g. "cuMemAlloc_v2"
	Code    Result
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // e.g. "out of memory"
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Func, e.Name, int(e.Code), e.Message)
}

// Is lets errors.Is match the sentinels: results that mean "no working
// driver" match ErrNoDriver, results that mean "no such device" match
// ErrNoDevice, CUDA_ERROR_OUT_OF_MEMORY matches ErrNoMemory, the kernel
// faults the driver keeps for the context's life match ErrContextLost.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoMemory:
		return e.Code == ErrOutOfMemory
	case ErrContextLost:
		switch e.Code {
		case ErrIllegalAddress, ErrLaunchTimeout, ErrAssert, ErrStackError, ErrIllegalInstr,
			ErrMisaligned, ErrAddressSpace, ErrInvalidPC, ErrLaunchFailed, ErrECCUncorrected:
			return true
		}
	case ErrNoDriver:
		switch e.Code {
		case ErrNotInitialized, ErrStubLibrary, ErrInsufficientDrv, ErrSysNotReady, ErrSysDrvMismatch, ErrCompatNotSupp:
			return true
		}
	case ErrNoDevice:
		switch e.Code {
		case ErrNoDeviceCode, ErrInvalidDevice, ErrDevUnavailable:
			return true
		}
	}
	return false
}
