package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// TMA tensor maps (CUDA 12+, sm_90): a 128-byte descriptor of a tiled view
// of global memory that the Hopper kernels' bulk copies read, made on the
// host by cuTensorMapEncodeTiled. It only encodes (no GPU work), but the
// driver checks the address against the calling thread's current context:
// on an OS thread where no context was ever made current it answers
// CUDA_ERROR_INVALID_CONTEXT, which a Go program meets whenever the
// scheduler runs the encoding goroutine on a new thread (it happens in
// conformance runs on an H200). So the encoder belongs to a Context and
// encodes with it current, as every other driver call here does.

// TensorMapSize is the size of a CUtensorMap (16 opaque 64-bit words).
const TensorMapSize = 128

// The CUtensorMap enum values (cuda.h, CUDA 12) GoFlash uses.
const (
	tensorMapFloat16       = 6 // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	tensorMapBFloat16      = 9 // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	tensorMapInterleave0   = 0 // CU_TENSOR_MAP_INTERLEAVE_NONE
	tensorMapSwizzle128B   = 3 // CU_TENSOR_MAP_SWIZZLE_128B
	tensorMapL2Promote256B = 3 // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
	tensorMapOOBZero       = 0 // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zero
)

// TensorMapEncoder encodes rank-4 fp16 or bf16 tensor maps of one context's memory
// without allocating: its arrays and the driver call's argument array are
// reused (see Args.argv), so one encoder serves one caller at a time.
type TensorMapEncoder struct {
	c       *Context
	dims    [4]uint64 // innermost (contiguous) dimension first
	strides [3]uint64 // byte strides of dimensions 1-3
	box     [4]uint32
	elem    [4]uint32
	argv    [12]uintptr
}

// NewTensorMapEncoder returns an encoder for c's memory; its first use binds
// the driver's cuTensorMapEncodeTiled.
func (c *Context) NewTensorMapEncoder() *TensorMapEncoder {
	return &TensorMapEncoder{c: c, elem: [4]uint32{1, 1, 1, 1}}
}

// bindTensorMap binds cuTensorMapEncodeTiled once; drivers before CUDA 12
// lack it.
func (d *driver) bindTensorMap() error {
	d.tmapOnce.Do(func() {
		p, err := lookupSymbol(d.lib, "cuTensorMapEncodeTiled")
		if err != nil || p == 0 {
			d.tmapErr = fmt.Errorf("%w: the driver does not export cuTensorMapEncodeTiled (CUDA 12 or newer has it)", ErrNoDriver)
			return
		}
		d.cuTensorMapEncodeTiled = p
	})
	return d.tmapErr
}

// HasTensorMaps reports whether the driver can encode TMA tensor maps.
func HasTensorMaps() bool {
	d, err := get()
	return err == nil && d.bindTensorMap() == nil
}

// EncodeTiled16 writes into out the map of a tensor of 16-bit elements
// (bf16 or fp16: the type only matters to TMA's reductions, which GoFlash
// does not use, and to tools that read the map) at device address base
// (16-byte aligned): dims from the innermost (contiguous)
// dimension out, strides the byte strides of dimensions 1-3 (each a
// multiple of 16, below 2^40), box the elements one copy moves per
// dimension (<= 256 each; box[0] x 2 bytes <= 128 with the 128-byte
// swizzle). The boxes land 128-byte swizzled (the layout wgmma's
// descriptors read), out-of-bounds elements read as zero, L2 promotion 256
// bytes. The driver checks the rules and answers CUDA_ERROR_INVALID_VALUE
// for a view it cannot express.
func (e *TensorMapEncoder) EncodeTiled16(out *[TensorMapSize]byte, bf16 bool, base uint64, dims [4]uint64, strides [3]uint64, box [4]uint32) error {
	d, err := get()
	if err != nil {
		return err
	}
	if err := d.bindTensorMap(); err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(e)
	pin.Pin(out)
	e.dims, e.strides, e.box = dims, strides, box
	typ := uintptr(tensorMapFloat16)
	if bf16 {
		typ = tensorMapBFloat16
	}
	e.argv = [12]uintptr{uintptr(unsafe.Pointer(out)), typ, 4, uintptr(base),
		uintptr(unsafe.Pointer(&e.dims[0])), uintptr(unsafe.Pointer(&e.strides[0])), uintptr(unsafe.Pointer(&e.box[0])),
		uintptr(unsafe.Pointer(&e.elem[0])), tensorMapInterleave0, tensorMapSwizzle128B, tensorMapL2Promote256B,
		tensorMapOOBZero}
	return e.c.do("cuTensorMapEncodeTiled", d.cuTensorMapEncodeTiled, e.argv[:]...)
}
