package flashattn

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/goflash/goflash/internal/cuda"
)

// The raw-pointer API: for programs whose tensors already live on the GPU
// (their own CUDA allocations, a PJRT or PyTorch buffer, another library's
// output). The caller owns every buffer (q, k, v, O, the LSE, and for the
// backward dO, dQ, dK, dV and the Di workspace) and the stream; a plan
// (RawForward, RawBackward) is made once per problem, and its Enqueue only
// checks the call and enqueues the kernels: no allocation, no
// synchronisation, no host copy. The result is ready when the caller's
// stream has run it.
//
// Contexts: a Device retains the GPU's primary context, the one the CUDA
// runtime creates for every library in the process (PyTorch, JAX/PJRT,
// cuBLAS), so device addresses and streams they made on that GPU are valid
// here as they are. A stream of another context (one made with cuCtxCreate)
// is refused.

// DType is the element type of a raw call's q, k, v, O and gradients.
type DType int

const (
	// FP16 is IEEE 754 binary16, the kernels' element type (fp32
	// accumulation).
	FP16 DType = iota + 1
	// BF16 is bfloat16 (fp32 accumulation), forward and backward, on sm_80
	// and newer (paths 80 and 90): the sm_75 path (no bf16 tensor cores)
	// refuses it with an *UnsupportedError. Nothing is ever converted
	// silently.
	BF16
)

func (t DType) String() string {
	switch t {
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// MarshalText writes the DType as its String ("fp16", "bf16").
func (t DType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (t *DType) UnmarshalText(b []byte) error {
	for _, c := range []DType{FP16, BF16} {
		if string(b) == c.String() {
			*t = c
			return nil
		}
	}
	return &OptionError{Option: "DType", Value: string(b), Reason: "want fp16 or bf16"}
}

// Size is the size of one element in bytes (0 for an unknown DType).
func (t DType) Size() int {
	if t == FP16 || t == BF16 {
		return 2
	}
	return 0
}

// checkDType refuses element types without kernels on kernel path path.
func checkDType(t DType, path int) error {
	switch t {
	case FP16:
		return nil
	case BF16:
		if path >= 80 {
			return nil
		}
		return &UnsupportedError{Backend: GPU, Feature: "dtype", Value: t.String(),
			Reason: fmt.Sprintf("the sm_%d path has no bf16 tensor cores", path)}
	}
	return &OptionError{Option: "DType", Value: t.String(), Reason: "want FP16 or BF16"}
}

// LSEBytes is the size in bytes of the log-sum-exp buffer: LSELen float32,
// laid out (B, Hq, Nq) contiguously.
func (d Dims) LSEBytes() int { return 4 * d.LSELen() }

// DiBytes is the size in bytes of the backward's Di workspace,
// rowsum(dO∘O): float32 (B, Hq, Nq), contiguous.
func (d Dims) DiBytes() int { return 4 * d.LSELen() }

// Span is the number of elements a tensor of shape s with strides st
// reaches from its first element (its largest offset plus one): a raw
// operand needs DType.Size()*Span bytes from its address. Strides must be
// non-negative; a span beyond int is math.MaxInt.
func (s Shape) Span(st Strides) int {
	n, ok := span(s, st)
	if !ok || n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

// span is Span with overflow reported (ok false) instead of saturated.
func span(s Shape, st Strides) (n uint64, ok bool) {
	ext := [4]int{s.B, s.N, s.H, s.D}
	n = 1
	for i, e := range ext {
		if e < 1 || st[i] < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(e-1), uint64(st[i]))
		var c uint64
		n, c = bits.Add64(n, lo, 0)
		if hi != 0 || c != 0 {
			return 0, false
		}
	}
	return n, true
}

// RawTensor is one BSHD operand of a raw call in device memory.
type RawTensor struct {
	// Ptr is the device address (CUdeviceptr) of element (0, 0, 0, 0),
	// 16-byte aligned.
	Ptr uint64
	// Strides are the element strides of B, N, H and D. The kernels read
	// and write each row of D elements contiguously in 16-byte vectors:
	// D's stride must be 1 and the others non-negative multiples of 8.
	// Packed QKV (B, N, 3, H, D) and BHSD layouts fit; an output's strides
	// must not map two elements to one address.
	Strides Strides
	// Bytes is how many bytes from Ptr the caller lets the call touch
	// (DType.Size() times Shape.Span, or the rest of the allocation).
	// 0 asks the driver for the allocation Ptr lies in
	// (cuPointerGetAttributes: one driver call per operand and call). That
	// is the allocator's block, which for a pooling allocator (PyTorch's
	// caching allocator) is larger than the tensor, and for memory mapped
	// from several cuMemCreate segments (PyTorch's expandable segments)
	// only the segment holding Ptr: give Bytes for those.
	Bytes int
}

// RawBuffer is a float32 buffer of a raw call in device memory: the LSE,
// or the backward's Di workspace (Dims.LSEBytes, Dims.DiBytes).
type RawBuffer struct {
	Ptr   uint64 // device address, 4-byte aligned
	Bytes int    // as RawTensor.Bytes
}

// Raw is t as an operand of raw calls: its address (Ptr), dense BSHD
// strides, and its size as Bytes, so calls need not ask the driver. The
// plan's dtype must be t's (RawTensor carries none). A freed tensor gives
// address 0, which raw calls refuse.
func (t *DeviceTensor) Raw() RawTensor {
	if t == nil {
		return RawTensor{}
	}
	return RawTensor{Ptr: t.Ptr(), Strides: t.shape.ContiguousStrides(), Bytes: t.dtype.Size() * t.shape.Numel()}
}

// RawLSE is r's LSE buffer as a raw call's LSE: RawForwardArgs.LSE writes
// it, RawBackwardArgs.LSE reads it, and r.LSE downloads it. For a raw
// forward to write into, any result of r.Dims serves (UploadResultAs of
// zeros allocates one). A freed result gives address 0, which raw calls
// refuse.
func (r *DeviceResult) RawLSE() RawBuffer {
	if r == nil || r.lse == nil || r.lse.Freed() {
		return RawBuffer{}
	}
	return RawBuffer{Ptr: r.lse.Ptr(), Bytes: r.Dims.LSEBytes()}
}

// RawForwardArgs are the operands of RawForward.Enqueue. The outputs (Out,
// LSE) must share no byte with any other operand (the checks refuse it);
// the inputs may overlap each other (q, k and v views of one packed QKV
// buffer, or one tensor passed as all three).
type RawForwardArgs struct {
	Q    RawTensor // (B, Nq, Hq, D), read
	K, V RawTensor // (B, Nk, Hkv, D), read
	Out  RawTensor // (B, Nq, Hq, D), written
	LSE  RawBuffer // written: natural log, -Inf for rows that see no key
}

// RawBackwardArgs are the operands of RawBackward.Enqueue. Outputs must not
// overlap inputs or each other (packed dQKV, like packed QKV, interleaves
// without overlapping): the checks refuse an output (dQ, dK, dV, Di) that
// shares a byte with any other operand. Inputs may overlap each other.
type RawBackwardArgs struct {
	Q, Out, DOut RawTensor // (B, Nq, Hq, D), read: the forward's inputs, output, and dL/dO
	K, V         RawTensor // (B, Nk, Hkv, D), read
	LSE          RawBuffer // the forward's, read
	DQ           RawTensor // (B, Nq, Hq, D), written
	DK, DV       RawTensor // (B, Nk, Hkv, D), written
	Di           RawBuffer // workspace (Dims.DiBytes), overwritten
}

// rawOp is one operand of a call as the checks see it.
type rawOp struct {
	arg   string
	ptr   uint64
	bytes int    // given by the caller; 0: ask the driver
	need  uint64 // bytes the kernels may touch from ptr
	align uint64
	out   bool // written by the call: it may overlap no other operand
	// The bytes it touches: ptr + sum of i_k*dims[k].step for
	// 0 <= i_k < dims[k].n, k < ndim (a buffer: one dim of need bytes; a
	// tensor: B, N, H, D and the element's bytes).
	dims [5]byteDim
	ndim int
}

// byteDim is one dimension of the bytes an operand touches: n indices,
// step bytes apart.
type byteDim struct{ n, step int64 }

// tensorOp checks t's strides against shape s (out: also that no two
// elements share an address) and returns it as a rawOp.
func tensorOp(arg string, t *RawTensor, s Shape, dt DType, out bool) (rawOp, error) {
	st := t.Strides
	if st[3] != 1 {
		return rawOp{}, &UnsupportedError{Backend: GPU, Feature: arg + " D stride", Value: fmt.Sprint(st[3]),
			Reason: "the kernels read each row of D elements contiguously: want 1"}
	}
	for i, name := range [3]string{"B", "N", "H"} {
		if st[i] < 0 || st[i]%8 != 0 {
			return rawOp{}, &UnsupportedError{Backend: GPU, Feature: arg + " " + name + " stride", Value: fmt.Sprint(st[i]),
				Reason: "the kernels move rows in 16-byte vectors: want a non-negative multiple of 8 elements"}
		}
	}
	n, ok := span(s, st)
	if ok {
		var hi uint64
		hi, n = bits.Mul64(n, uint64(dt.Size()))
		ok = hi == 0 && n <= math.MaxInt64
	}
	if !ok {
		return rawOp{}, &DataError{Arg: arg, Reason: fmt.Sprintf("shape %v with strides %v reaches beyond 2^63 bytes", s, st)}
	}
	if out && !injective(s, st) {
		return rawOp{}, &DataError{Arg: arg, Reason: fmt.Sprintf("strides %v map two elements of %v to one address: an output needs each its own", st, s)}
	}
	o := rawOp{arg: arg, ptr: t.Ptr, bytes: t.Bytes, need: n, align: 16, out: out}
	es := int64(dt.Size())
	for i, e := range [4]int{s.B, s.N, s.H, s.D} {
		o.add(int64(e), es*int64(st[i])) // each at most n bytes: checked above
	}
	o.add(es, 1)
	return o, nil
}

// add appends a dimension of n indices step bytes apart; one of a single
// index or step 0 (a broadcast input) adds no byte and is left out.
func (o *rawOp) add(n, step int64) {
	if n > 1 && step > 0 {
		o.dims[o.ndim] = byteDim{n, step}
		o.ndim++
	}
}

// bufferOp is a float32 buffer of need bytes as a rawOp.
func bufferOp(arg string, b *RawBuffer, need int, out bool) rawOp {
	o := rawOp{arg: arg, ptr: b.Ptr, bytes: b.Bytes, need: uint64(need), align: 4, out: out}
	o.add(int64(need), 1)
	return o
}

// injective reports whether distinct elements of shape s with strides st
// have distinct offsets: sorted by stride, every stride must step past
// everything the smaller ones reach (dimensions of extent 1 take no part).
func injective(s Shape, st Strides) bool {
	type dim struct{ n, st int }
	var ds [4]dim
	k := 0
	for i, e := range [4]int{s.B, s.N, s.H, s.D} {
		if e > 1 {
			ds[k] = dim{e, st[i]}
			k++
		}
	}
	for i := 1; i < k; i++ { // insertion sort, four elements at most
		for j := i; j > 0 && ds[j].st < ds[j-1].st; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
	reach := 0 // largest offset of the smaller dimensions
	for _, d := range ds[:k] {
		if d.st <= reach {
			return false
		}
		reach += (d.n - 1) * d.st
	}
	return true
}

// checkOps checks each operand alone, without the driver: address set and
// aligned, and within the bytes the caller gave.
func checkOps(ops []rawOp) error {
	for i := range ops {
		o := &ops[i]
		switch {
		case o.ptr == 0:
			return &DataError{Arg: o.arg, Reason: "device address is 0"}
		case o.ptr%o.align != 0:
			return &DataError{Arg: o.arg, Reason: fmt.Sprintf("device address %#x is not %d-byte aligned", o.ptr, o.align)}
		case o.bytes < 0:
			return &DataError{Arg: o.arg, Reason: fmt.Sprintf("Bytes is %d, want >= 0 (0: ask the driver)", o.bytes)}
		case o.bytes > 0 && o.need > uint64(o.bytes):
			return o.short(uint64(o.bytes), "the caller gives")
		case o.need > 0 && o.ptr > math.MaxUint64-(o.need-1):
			return &DataError{Arg: o.arg, Reason: fmt.Sprintf("the call reaches %d bytes from %#x: past the end of the 64-bit address space", o.need, o.ptr)}
		}
	}
	return nil
}

// checkOverlaps refuses an output that shares a byte with another operand.
// Enqueue checks it after the driver's allocation bounds, so that a view
// running past its allocation is named as such, not as the neighbour it
// runs into.
func checkOverlaps(ops []rawOp) error {
	for j := range ops {
		for i := range j {
			a, b := &ops[i], &ops[j]
			if !a.out && !b.out || !overlap(a, b) {
				continue
			}
			if !b.out { // name the output
				a, b = b, a
			}
			return &DataError{Arg: b.arg, Reason: fmt.Sprintf("shares bytes with %s (%d bytes from %#x): an output may not overlap any other operand", a.arg, a.need, a.ptr)}
		}
	}
	return nil
}

// overlapBudget bounds the search of overlap: beyond it two operands are
// taken to overlap (strides that far from any layout the kernels are
// given; the nested layouts of dense, packed and BHSD tensors take a few
// dozen steps).
const overlapBudget = 1 << 16

// overlap reports whether operands a and b, each within the address space,
// touch a common byte: whether a.ptr + sum i_k*a.step_k = b.ptr + sum
// j_k*b.step_k for indices within their dims. Disjoint ranges answer at
// once; otherwise the dims of both, equal steps merged (their index
// differences form one range), are searched from the largest step down,
// each index confined to what the smaller steps can still make up.
func overlap(a, b *rawOp) bool {
	// Compared by differences: a range may end at 2^64, where ptr+need wraps.
	if a.need == 0 || b.need == 0 || a.ptr >= b.ptr && a.ptr-b.ptr >= b.need || b.ptr >= a.ptr && b.ptr-a.ptr >= a.need {
		return false
	}
	if a.need > math.MaxInt64/2 || b.need > math.MaxInt64/2 {
		return true // no int64 search; no GPU has such a range
	}
	// The ranges meet, so |b.ptr - a.ptr| < max(a.need, b.need).
	var s overlapSearch
	for _, d := range a.dims[:a.ndim] {
		s.add(d.step, 0, d.n-1)
	}
	for _, d := range b.dims[:b.ndim] {
		s.add(d.step, -(d.n - 1), 0)
	}
	s.prepare()
	s.budget = overlapBudget
	return s.find(0, int64(b.ptr-a.ptr))
}

// overlapSearch finds indices d_k in [lo_k, hi_k] with sum d_k*step_k = t.
type overlapSearch struct {
	m            int
	step, lo, hi [10]int64
	sufLo, sufHi [11]int64 // the least and most dims k.. make up
	interval     [11]bool  // dims k.. make up every value between
	budget       int
}

// add merges a dimension into the one of the same step, if any.
func (s *overlapSearch) add(step, lo, hi int64) {
	for k := range s.m {
		if s.step[k] == step {
			s.lo[k] += lo
			s.hi[k] += hi
			return
		}
	}
	s.step[s.m], s.lo[s.m], s.hi[s.m] = step, lo, hi
	s.m++
}

// prepare sorts the dims by step, largest first, and sums from the bottom.
func (s *overlapSearch) prepare() {
	for i := 1; i < s.m; i++ { // insertion sort, ten at most
		for j := i; j > 0 && s.step[j] > s.step[j-1]; j-- {
			s.step[j], s.step[j-1] = s.step[j-1], s.step[j]
			s.lo[j], s.lo[j-1] = s.lo[j-1], s.lo[j]
			s.hi[j], s.hi[j-1] = s.hi[j-1], s.hi[j]
		}
	}
	s.interval[s.m] = true // the empty sum: {0}
	for k := s.m - 1; k >= 0; k-- {
		s.sufLo[k] = s.sufLo[k+1] + s.lo[k]*s.step[k]
		s.sufHi[k] = s.sufHi[k+1] + s.hi[k]*s.step[k]
		// Every value of [sufLo, sufHi] when the dims below leave no gap
		// as wide as this step (or this dim has one index).
		s.interval[k] = s.interval[k+1] && (s.lo[k] == s.hi[k] || s.step[k] <= s.sufHi[k+1]-s.sufLo[k+1]+1)
	}
}

// find reports whether dims k.. make up t (true too once the budget is spent).
func (s *overlapSearch) find(k int, t int64) bool {
	if t < s.sufLo[k] || t > s.sufHi[k] {
		return false
	}
	if s.interval[k] {
		return true
	}
	st := s.step[k]
	first := max(s.lo[k], ceilDiv64(t-s.sufHi[k+1], st))
	last := min(s.hi[k], floorDiv64(t-s.sufLo[k+1], st))
	for d := first; d <= last; d++ {
		if s.budget--; s.budget <= 0 || s.find(k+1, t-d*st) {
			return true
		}
	}
	return false
}

func floorDiv64(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv64(a, b int64) int64 { return -floorDiv64(-a, b) }

func (o *rawOp) short(have uint64, whose string) error {
	return &DataError{Arg: o.arg, Reason: fmt.Sprintf("the call reaches %d bytes from %#x, %s %d", o.need, o.ptr, whose, have)}
}

// rawPlan is what both plans share: the device, a module of their kernels
// (ForcePath unloads every module at once, so one tells a stale plan), and
// the probe their queries write to. d.mu is held for every
// method but check.
type rawPlan struct {
	d      *Device
	p      problem
	dt     DType
	mod    *cuda.Module
	probe  *cuda.Probe
	fields rawFields // where Enqueue writes the operands into the plan's parameter block
}

// checkRawDims checks a raw call's problem and element type as far as
// they can be checked without a GPU.
func checkRawDims(dims Dims, dt DType) error {
	if dt.Size() == 0 {
		return checkDType(dt, 0)
	}
	if err := dims.Validate(); err != nil {
		return err
	}
	if err := checkShape("q", dims.QShape()); err != nil {
		return err
	}
	return checkShape("k", dims.KVShape())
}

// newRawPlan makes a plan of problem dims in element type dt on d, with
// d.mu held: it checks dt and the options, refuses a window, softcap or
// ALiBi, which raw plans do not run, saying why, and has load prepare the
// plan's kernels.
func newRawPlan[P any](d *Device, dims Dims, dt DType, o *Options, why string, load func(rawPlan) (P, error)) (P, error) {
	var none P
	if err := d.lock(); err != nil {
		return none, err
	}
	defer d.mu.Unlock()
	if err := checkDType(dt, d.path); err != nil {
		return none, err
	}
	if err := checkRawDims(dims, dt); err != nil {
		return none, err
	}
	p, err := o.resolve(dims)
	if err != nil {
		return none, err
	}
	if f, v := p.modFeature(); f != "" {
		return none, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: why}
	}
	return load(rawPlan{d: d, p: p, dt: dt, probe: cuda.NewProbe()})
}

// ready checks, with d.mu held, that the plan's kernels are still loaded,
// that every operand with Bytes 0 lies on this GPU and within its
// allocation, and that the stream is of this device's context.
func (r *rawPlan) ready(stream uintptr, ops []rawOp) error {
	d := r.d
	if !d.shipped(r.mod) {
		return &DataError{Arg: "plan", Reason: "the device's kernels were reloaded (ForcePath) after the plan was made: make a new one"}
	}
	for i := range ops {
		o := &ops[i]
		if o.bytes > 0 {
			continue
		}
		start, size, ord, err := d.ctx.AddressRange(o.ptr, r.probe)
		if err != nil {
			return fmt.Errorf("flashattn: %s: asking the driver about %#x: %w", o.arg, o.ptr, err)
		}
		if size == 0 {
			return &DataError{Arg: o.arg, Reason: fmt.Sprintf("%#x lies in no CUDA allocation", o.ptr)}
		}
		if ord != d.info.Ordinal {
			return &DataError{Arg: o.arg, Reason: fmt.Sprintf("%#x is memory of GPU %d, the plan runs on %s", o.ptr, ord, d.info)}
		}
		if have := start + size - o.ptr; o.need > have {
			return o.short(have, "its allocation has")
		}
	}
	own, err := d.ctx.OwnsStream(stream, r.probe)
	if err != nil {
		return fmt.Errorf("flashattn: stream %#x: %w", stream, err)
	}
	if !own {
		return &DataError{Arg: "stream", Reason: fmt.Sprintf("%#x belongs to another CUDA context; use one of the primary context of %s (the CUDA runtime's, which PyTorch and PJRT use)", stream, d.info)}
	}
	return nil
}

// Stream is a CUDA stream of a Device, for callers without streams of their
// own; raw calls take its Handle.
type Stream struct {
	d *Device
	s *cuda.Stream
}

// NewStream creates a stream on the device. It synchronises with the legacy
// default stream; Device.Close destroys it.
func (d *Device) NewStream() (*Stream, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	s, err := d.ctx.NewStream()
	if err != nil {
		return nil, err
	}
	return &Stream{d: d, s: s}, nil
}

// Handle is the stream's CUstream, to pass to Enqueue (or to other CUDA
// code in the process); 0 (the legacy default stream) for a nil or zero
// *Stream.
func (s *Stream) Handle() uintptr {
	if s == nil || s.s == nil {
		return 0
	}
	return s.s.Handle()
}

// Synchronize waits for the work enqueued on the stream. A kernel fault is
// reported here, wrapping ErrContextLost. A nil or zero *Stream (not made
// by NewStream) acts as one of a closed Device: ErrDeviceClosed.
func (s *Stream) Synchronize() error {
	if s == nil || s.s == nil || s.d == nil {
		return fmt.Errorf("flashattn: stream: %w (a nil or zero Stream: use Device.NewStream)", ErrDeviceClosed)
	}
	if err := s.s.Synchronize(); err != nil {
		return fmt.Errorf("flashattn: stream of %s: %w", s.d.info, err)
	}
	return nil
}

// Destroy releases the stream; a second Destroy returns nil, as does
// Destroy of a nil or zero *Stream.
func (s *Stream) Destroy() error {
	if s == nil || s.s == nil {
		return nil
	}
	return s.s.Destroy()
}
