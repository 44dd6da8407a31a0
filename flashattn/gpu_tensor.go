package flashattn

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/goflash/goflash/internal/cuda"
)

// DeviceTensor is a dense BSHD fp16 or bf16 tensor (UploadAs) in a Device's memory.
type DeviceTensor struct {
	dev   *Device
	shape Shape
	dtype DType
	buf   *cuda.Buffer

	mu    sync.Mutex
	freed bool
}

// Shape is the tensor's shape (the zero Shape for a nil *DeviceTensor).
func (t *DeviceTensor) Shape() Shape {
	if t == nil {
		return Shape{}
	}
	return t.shape
}

// Ptr is the tensor's device address (CUdeviceptr), dense BSHD, for raw
// calls (Raw) and other CUDA code of the process. It is valid until Free or
// Device.Close, and 0 after (raw calls refuse 0). What other code writes
// there skips Upload's checks: a NaN or Inf it leaves makes NaN rows in
// later calls on the tensor.
func (t *DeviceTensor) Ptr() uint64 {
	if t.usable("tensor", nil) != nil {
		return 0
	}
	return t.buf.Ptr()
}

// DType is the tensor's element type: FP16, or BF16 for UploadAs's bf16
// tensors and the outputs of Forward on them (0 for a nil *DeviceTensor).
func (t *DeviceTensor) DType() DType {
	if t == nil {
		return 0
	}
	return t.dtype
}

// Upload converts t (float32, any strides) to fp16 on the host, rounding to
// nearest even, and copies it to the device as a dense tensor: UploadAs(t,
// FP16). Every GPU entry point takes its data through UploadAs or
// UploadBits, which refuse values the element type cannot hold (fp16: NaN,
// Inf, |x| >= 65520) with a *DataError that names the element: in the
// kernels they would turn whole rows into NaN, where the CPU backends
// compute in float32. (Forward and Backward with Auto run such inputs on
// the CPU and say why.)
func (d *Device) Upload(t *Tensor) (*DeviceTensor, error) { return d.upload("tensor", t) }

// UploadAs converts t (float32, any strides) to element type dt on the
// host, rounding to nearest even, and copies it to the device as a dense
// tensor. Values dt cannot hold are refused with a *DataError (fp16: NaN,
// Inf, |x| >= 65520; bf16: NaN, Inf and what rounds to Inf). The device
// calls take tensors of one dtype and run its kernels: bf16 ones those of
// the sm_80 path, or on an H100/H200 the Hopper kernels' (the sm_75 path,
// without bf16 tensor cores, refuses them with an *UnsupportedError), and
// their outputs are of that dtype.
func (d *Device) UploadAs(t *Tensor, dt DType) (*DeviceTensor, error) {
	if dt.Size() == 0 {
		return nil, checkDType(dt, 0)
	}
	return d.uploadAs("tensor", t, dt)
}

// upload is Upload naming the argument in errors.
func (d *Device) upload(arg string, t *Tensor) (*DeviceTensor, error) {
	return d.uploadAs(arg, t, FP16)
}

// uploadAs is UploadAs naming the argument in errors.
func (d *Device) uploadAs(arg string, t *Tensor, dt DType) (*DeviceTensor, error) {
	if err := t.check(arg); err != nil {
		return nil, err
	}
	bits, err := tensorToBits(arg, t, dt)
	if err != nil {
		return nil, err
	}
	return d.uploadBits(t.Shape, dt, bits)
}

// UploadBits copies dense BSHD bits of element type dt (binary16 for
// FP16, bfloat16 for BF16) and shape s to the device; bits that are NaN or
// Inf are refused, as by UploadAs.
func (d *Device) UploadBits(s Shape, dt DType, bits []uint16) (*DeviceTensor, error) {
	finite, rangeError := fp16Finite, fp16RangeError
	switch dt {
	case FP16:
	case BF16:
		finite, rangeError = bf16Finite, bf16RangeError
	default:
		return nil, checkDType(dt, 0)
	}
	if err := checkShape("tensor", s); err != nil {
		return nil, err
	}
	if len(bits) != s.Numel() {
		return nil, &DataError{Arg: "bits", Len: len(bits), Need: s.Numel(),
			Reason: fmt.Sprintf("has %d values, shape %v needs %d", len(bits), s, s.Numel())}
	}
	for i, h := range bits {
		if !finite(h) {
			return nil, rangeError("bits", s, i, fmt.Sprintf("%#04x", h))
		}
	}
	return d.uploadBits(s, dt, bits)
}

// uploadBits copies checked bits of dtype dt to a new device tensor.
func (d *Device) uploadBits(s Shape, dt DType, bits []uint16) (*DeviceTensor, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	t, err := d.allocAs(s, dt)
	if err != nil {
		return nil, err
	}
	if err := cuda.CopyToDevice(t.buf, bits); err != nil {
		_ = t.buf.Free()
		return nil, err
	}
	return t, nil
}

// uploadAll uploads ts in order, naming ts[i] args[i] in errors; on
// failure the tensors uploaded so far are returned with the error, for the
// caller's freeAll.
func (d *Device) uploadAll(args []string, ts ...*Tensor) ([]*DeviceTensor, error) {
	var out []*DeviceTensor
	for i, t := range ts {
		dt, err := d.upload(args[i], t)
		if err != nil {
			return out, err
		}
		out = append(out, dt)
	}
	return out, nil
}

// argNames names the tensor arguments of a call in the order Forward and
// Backward take them.
var argNames = []string{"q", "k", "v", "out", "dOut"}

// freeAll frees every tensor of ts.
func freeAll(ts []*DeviceTensor) error {
	var err error
	for _, t := range ts {
		err = errors.Join(err, t.Free())
	}
	return err
}

// alloc allocates an uninitialised fp16 tensor; d.mu is held.
func (d *Device) alloc(s Shape) (*DeviceTensor, error) { return d.allocAs(s, FP16) }

// allocAs allocates an uninitialised tensor of dtype dt; d.mu is held.
func (d *Device) allocAs(s Shape, dt DType) (*DeviceTensor, error) {
	// Rounded up to whole 32-bit words, so Memset32 can poison every element.
	b, err := d.ctx.Alloc((dt.Size()*s.Numel() + 3) &^ 3)
	if err != nil {
		return nil, fmt.Errorf("flashattn: allocating %v %v on %s: %w", s, dt, d.info, err)
	}
	return &DeviceTensor{dev: d, shape: s, dtype: dt, buf: b}, nil
}

// usable reports why t cannot be used on d (nil, zero, freed, other
// device, closed).
func (t *DeviceTensor) usable(arg string, d *Device) error {
	if t == nil {
		return &DataError{Arg: arg, Reason: "device tensor is nil"}
	}
	if t.buf == nil || t.dev == nil {
		return &DataError{Arg: arg, Reason: "a zero DeviceTensor (not made by a Device's Upload or calls)"}
	}
	t.mu.Lock()
	freed := t.freed
	t.mu.Unlock()
	if freed || t.buf.Freed() {
		return fmt.Errorf("%s: %w", arg, ErrFreed)
	}
	if d != nil && t.dev != d {
		return &DataError{Arg: arg, Reason: fmt.Sprintf("tensor lives on %s, not %s", t.dev.info, d.info)}
	}
	return nil
}

// DownloadFP16 copies an fp16 tensor back as dense BSHD binary16 bits.
func (t *DeviceTensor) DownloadFP16() ([]uint16, error) { return t.downloadBits(FP16) }

// downloadBits copies the tensor back as dense BSHD bits, which must be of dtype dt.
func (t *DeviceTensor) downloadBits(dt DType) ([]uint16, error) {
	if err := t.usable("tensor", nil); err != nil {
		return nil, err
	}
	if t.dtype != dt {
		return nil, &DataError{Arg: "tensor", Reason: fmt.Sprintf("tensor is %v, not %v", t.dtype, dt)}
	}
	if err := t.dev.lock(); err != nil {
		return nil, err
	}
	defer t.dev.mu.Unlock()
	out := make([]uint16, t.shape.Numel())
	if err := cuda.CopyFromDevice(out, t.buf); err != nil {
		return nil, err
	}
	return out, nil
}

// Download copies the tensor back as a dense float32 Tensor (exact: every
// fp16 and bf16 value is a float32 value).
func (t *DeviceTensor) Download() (*Tensor, error) {
	if err := t.usable("tensor", nil); err != nil {
		return nil, err
	}
	out, err := Make(t.shape)
	if err != nil {
		return nil, err
	}
	return out, t.downloadInto(out.Data)
}

// downloadInto converts the tensor into dst, dense BSHD.
func (t *DeviceTensor) downloadInto(dst []float32) error {
	dt, conv := FP16, FP16ToFloat32
	if t != nil && t.dtype == BF16 {
		dt, conv = BF16, BF16ToFloat32
	}
	bits, err := t.downloadBits(dt)
	if err != nil {
		return err
	}
	for i, h := range bits {
		dst[i] = conv(h)
	}
	return nil
}

// Free releases the device memory; a second Free returns nil, as does
// Free of a nil or zero DeviceTensor.
func (t *DeviceTensor) Free() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed || t.buf == nil {
		t.freed = true
		return nil
	}
	t.freed = true
	return t.buf.Free() // nil when Device.Close already freed it
}

// DeviceResult is the output of Device.Forward: O on the device and the
// log-sum-exp of every row in a device buffer.
type DeviceResult struct {
	Dims   Dims
	Out    *DeviceTensor // (B, Nq, Hq, D), the dtype of q
	Kernel KernelInfo    // the variant that ran
	lse    *cuda.Buffer  // (B, Hq, Nq) float32
	// lastNoKey is the largest row index with LSE -Inf in an uploaded
	// result (-1: none), checked against the mask by Backward; a result of
	// Forward has -Inf rows only where its mask hides every key.
	lastNoKey int
}

// LSE downloads the log-sum-exp (B, Hq, Nq) (natural log; -Inf for a row
// that sees no key). A nil or zero DeviceResult is a *DataError.
func (r *DeviceResult) LSE() ([]float32, error) {
	if err := r.usable(); err != nil {
		return nil, err
	}
	out := make([]float32, r.Dims.LSELen())
	return out, r.lseInto(out)
}

// usable reports why r cannot be read (nil, zero, freed, closed).
func (r *DeviceResult) usable() error {
	if r == nil {
		return &DataError{Arg: "result", Reason: "device result is nil"}
	}
	if r.lse == nil {
		return &DataError{Arg: "result", Reason: "a zero DeviceResult (not made by a Device's Forward or UploadResultAs)"}
	}
	return r.Out.usable("result", nil)
}

// lseInto downloads the log-sum-exp into dst.
func (r *DeviceResult) lseInto(dst []float32) error {
	if err := r.usable(); err != nil {
		return err
	}
	if err := r.Out.dev.lock(); err != nil {
		return err
	}
	defer r.Out.dev.mu.Unlock()
	return cuda.CopyFromDevice(dst, r.lse)
}

// Free releases O and the LSE buffer; Free of a nil or zero DeviceResult
// returns nil.
func (r *DeviceResult) Free() error {
	if r == nil {
		return nil
	}
	err := r.Out.Free()
	if r.lse == nil {
		return err
	}
	if ferr := r.lse.Free(); err == nil {
		err = ferr
	}
	return err
}

// nanFP16x2, nanBF16x2 and nanF32 poison outputs before a launch, so an
// element a kernel fails to write reads as NaN instead of stale memory. They
// are attntest's PoisonBits16, PoisonBitsBF16 (twice) and PoisonBits32, so
// the conformance suite reports such elements as never written.
const (
	nanFP16x2 = 0x7ead7ead
	nanBF16x2 = 0x7fed7fed
	nanF32    = 0x7fc0dead
)

// poisonOf is the poison of two elements of dtype dt.
func poisonOf(dt DType) uint32 {
	if dt == BF16 {
		return nanBF16x2
	}
	return nanFP16x2
}

var log2e = math.Log2(math.E)
