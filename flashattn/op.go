package flashattn

import "fmt"

// Op names a kind of GPU call, for what a Device answers about its calls:
// the head dims it runs them at (Device.SupportedHeadDims), the kernels a
// call runs (Device.Kernels) and their timing (Device.Bench). The zero Op
// names none.
type Op int

const (
	// OpForward is Device.Forward (and ForwardHost, and Forward with the
	// GPU backend).
	OpForward Op = iota + 1
	// OpBackward is Device.Backward (and BackwardHost).
	OpBackward
	// OpForwardBackward is a Forward and then the Backward of its result:
	// a training step's attention.
	OpForwardBackward
	// OpVarlenForward is Device.ForwardVarlen: sequences packed along N.
	OpVarlenForward
	// OpVarlenBackward is Device.BackwardVarlen.
	OpVarlenBackward
	// OpKVCache is Device.ForwardKVCache and ForwardKVCacheAppend: decode
	// against a key/value cache.
	OpKVCache
	// OpRawForward is RawForward.Enqueue (Device.NewRawForward's plan).
	OpRawForward
	// OpRawBackward is RawBackward.Enqueue (Device.NewRawBackward's plan).
	OpRawBackward
)

var opNames = [...]string{
	OpForward:         "forward",
	OpBackward:        "backward",
	OpForwardBackward: "forward+backward",
	OpVarlenForward:   "varlen forward",
	OpVarlenBackward:  "varlen backward",
	OpKVCache:         "KV cache",
	OpRawForward:      "raw forward",
	OpRawBackward:     "raw backward",
}

func (op Op) String() string {
	if op.valid() {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

func (op Op) valid() bool { return op >= OpForward && op <= OpRawBackward }

// backward reports whether op runs a backward pass.
func (op Op) backward() bool {
	return op == OpBackward || op == OpForwardBackward || op == OpVarlenBackward || op == OpRawBackward
}

// checkOp refuses an Op that is none of the constants.
func checkOp(op Op) error {
	if !op.valid() {
		return &OptionError{Option: "op", Value: op.String(), Reason: "want one of the Op constants (OpForward ... OpRawBackward)"}
	}
	return nil
}
