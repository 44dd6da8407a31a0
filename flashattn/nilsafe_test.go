package flashattn_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// sweepDims is the problem the plausible arguments of callAll describe.
var sweepDims = flashattn.Dims{B: 1, Nq: 4, Nk: 4, Hq: 2, Hkv: 2, D: 8}

// plausible returns an argument of type t that a caller could well pass:
// a valid tensor, the sweep's dims, an LSE of their length; the zero value
// of types without an obvious one.
func plausible(t reflect.Type) reflect.Value {
	d := sweepDims
	var v any
	switch t {
	case reflect.TypeFor[*flashattn.Tensor]():
		v = flashattn.Random(d.QShape(), 1)
	case reflect.TypeFor[flashattn.Dims]():
		v = d
	case reflect.TypeFor[flashattn.Shape]():
		v = d.QShape()
	case reflect.TypeFor[[]float32]():
		v = make([]float32, d.LSELen())
	case reflect.TypeFor[[]uint16]():
		v = make([]uint16, d.QShape().Numel())
	case reflect.TypeFor[[]int]():
		v = []int{0, d.Nq}
	case reflect.TypeFor[int]():
		v = 1
	case reflect.TypeFor[flashattn.DType]():
		v = flashattn.FP16
	case reflect.TypeFor[flashattn.Op]():
		v = flashattn.OpForwardBackward
	case reflect.TypeFor[flashattn.BenchConfig]():
		v = flashattn.BenchConfig{Reps: 1}
	case reflect.TypeFor[*flashattn.DeviceTensor]():
		v = &flashattn.DeviceTensor{}
	case reflect.TypeFor[*flashattn.DeviceResult]():
		v = &flashattn.DeviceResult{Dims: d}
	case reflect.TypeFor[flashattn.Varlen]():
		v = flashattn.Varlen{CuSeqlensQ: []int{0, d.Nq}, CuSeqlensK: []int{0, d.Nk}}
	case reflect.TypeFor[flashattn.KVCache]():
		v = flashattn.KVCache{SeqLens: []int{d.Nk}}
	case reflect.TypeFor[*flashattn.RawForwardArgs]():
		q, kv := rawOperand(d.QShape()), rawOperand(d.KVShape())
		v = &flashattn.RawForwardArgs{Q: q, K: kv, V: kv, Out: q, LSE: flashattn.RawBuffer{Ptr: 1 << 20, Bytes: d.LSEBytes()}}
	case reflect.TypeFor[*flashattn.RawBackwardArgs]():
		q, kv := rawOperand(d.QShape()), rawOperand(d.KVShape())
		buf := flashattn.RawBuffer{Ptr: 1 << 20, Bytes: d.LSEBytes()}
		v = &flashattn.RawBackwardArgs{Q: q, Out: q, DOut: q, K: kv, V: kv, LSE: buf, DQ: q, DK: kv, DV: kv, Di: buf}
	default:
		return reflect.Zero(t)
	}
	return reflect.ValueOf(v)
}

// rawOperand is a dense raw operand of shape s at a made-up address.
func rawOperand(s flashattn.Shape) flashattn.RawTensor {
	return flashattn.RawTensor{Ptr: 1 << 16, Strides: s.ContiguousStrides(), Bytes: 2 * s.Numel()}
}

// callAll calls every exported method of recv with arguments from arg (a
// variadic method with none) and returns the methods that panicked, with
// what they panicked with.
func callAll(recv any, arg func(reflect.Type) reflect.Value) []string {
	var panics []string
	v := reflect.ValueOf(recv)
	for i := 0; i < v.NumMethod(); i++ {
		m, name := v.Method(i), v.Type().Method(i).Name
		mt := m.Type()
		args := make([]reflect.Value, mt.NumIn())
		for a := range args {
			args[a] = arg(mt.In(a))
			if mt.IsVariadic() && a == len(args)-1 {
				args[a] = reflect.Zero(mt.In(a))
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					panics = append(panics, fmt.Sprintf("%s: %v", name, r))
				}
			}()
			if mt.IsVariadic() {
				m.CallSlice(args)
			} else {
				m.Call(args)
			}
		}()
	}
	return panics
}

// TestNoPanicOnZeroReceivers calls every exported method of the package's
// handle types on a nil and on a zero receiver (and of its value types on
// a zero value), once with zero arguments and once with plausible ones (a
// valid tensor, dims, an LSE of their length): none may panic. A zero
// Device acts as a closed one, a zero DeviceTensor or DeviceResult as a
// freed one, a zero plan or stream as one of a closed Device.
func TestNoPanicOnZeroReceivers(t *testing.T) {
	for _, r := range []struct {
		name string
		recv any
	}{
		{"nil *Device", (*flashattn.Device)(nil)},
		{"zero Device", &flashattn.Device{}},
		{"nil *DeviceTensor", (*flashattn.DeviceTensor)(nil)},
		{"zero DeviceTensor", &flashattn.DeviceTensor{}},
		{"nil *DeviceResult", (*flashattn.DeviceResult)(nil)},
		{"zero DeviceResult", &flashattn.DeviceResult{}},
		{"nil *DeviceGrads", (*flashattn.DeviceGrads)(nil)},
		{"zero DeviceGrads", &flashattn.DeviceGrads{}},
		{"nil *Tensor", (*flashattn.Tensor)(nil)},
		{"zero Tensor", &flashattn.Tensor{}},
		{"New of an impossible shape", flashattn.New(flashattn.Shape{B: -1, N: 2, H: 3, D: 4})},
		{"New of a shape too large", flashattn.New(flashattn.Shape{B: 1 << 20, N: 1 << 20, H: 1 << 20, D: 1})},
		{"nil *Trace", (*flashattn.Trace)(nil)},
		{"zero Trace", &flashattn.Trace{}},
		{"nil *RawForward", (*flashattn.RawForward)(nil)},
		{"zero RawForward", &flashattn.RawForward{}},
		{"nil *RawBackward", (*flashattn.RawBackward)(nil)},
		{"zero RawBackward", &flashattn.RawBackward{}},
		{"nil *Stream", (*flashattn.Stream)(nil)},
		{"zero Stream", &flashattn.Stream{}},
		{"zero Dims", flashattn.Dims{}},
		{"Dims with Hkv 0", flashattn.Dims{B: 1, Nq: 4, Nk: 4, Hq: 2, Hkv: 0, D: 8}},
		{"zero Shape", flashattn.Shape{}},
		{"zero Varlen", flashattn.Varlen{}},
		{"zero KVCache", flashattn.KVCache{}},
	} {
		for _, args := range []struct {
			name string
			f    func(reflect.Type) reflect.Value
		}{{"zero arguments", reflect.Zero}, {"plausible arguments", plausible}} {
			for _, p := range callAll(r.recv, args.f) {
				t.Errorf("%s, %s: %s", r.name, args.name, p)
			}
		}
	}
}

// TestZeroReceiversRefuse: the methods the reliability review found
// panicking on a zero or nil receiver, or on an index outside the tensor,
// return a typed error, or the zero result their doc gives.
func TestZeroReceiversRefuse(t *testing.T) {
	d := sweepDims
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	var de *flashattn.DataError
	isDataError := func(err error) bool { return errors.As(err, &de) }
	isClosed := func(err error) bool { return errors.Is(err, flashattn.ErrDeviceClosed) }
	for _, c := range []struct {
		name string
		call func() error
		want func(error) bool // nil: want a nil error
	}{
		{"zero Device ForwardHost", func() error { _, err := (&flashattn.Device{}).ForwardHost(q, k, v, nil); return err }, isClosed},
		{"zero Device BackwardHost", func() error {
			_, err := (&flashattn.Device{}).BackwardHost(q, k, v, q, q, make([]float32, d.LSELen()), nil)
			return err
		}, isClosed},
		{"zero Device Upload", func() error { _, err := (&flashattn.Device{}).Upload(q); return err }, isClosed},
		{"zero Device NewStream", func() error { _, err := (&flashattn.Device{}).NewStream(); return err }, isClosed},
		{"zero Device UploadAs", func() error { _, err := (&flashattn.Device{}).UploadAs(q, flashattn.BF16); return err }, isClosed},
		{"zero Device Kernels", func() error {
			_, err := (&flashattn.Device{}).Kernels(flashattn.OpForward, d, flashattn.FP16, nil)
			return err
		}, isClosed},
		{"nil *Device Bench", func() error {
			_, err := (*flashattn.Device)(nil).Bench(flashattn.OpBackward, d, flashattn.FP16, nil, flashattn.BenchConfig{Reps: 1})
			return err
		}, isClosed},
		{"zero Device ForwardVarlenHost", func() error {
			_, err := (&flashattn.Device{}).ForwardVarlenHost(q, k, v, flashattn.Varlen{CuSeqlensQ: []int{0, d.Nq}, CuSeqlensK: []int{0, d.Nk}}, nil)
			return err
		}, isClosed},
		{"nil *Device ForwardKVCacheHost", func() error {
			_, err := (*flashattn.Device)(nil).ForwardKVCacheHost(q, k, v, flashattn.KVCache{SeqLens: []int{d.Nk}}, nil)
			return err
		}, isClosed},
		{"zero Device Close", func() error { return (&flashattn.Device{}).Close() }, nil},
		{"zero Device Close twice", func() error { dev := &flashattn.Device{}; _ = dev.Close(); return dev.Close() }, nil},
		{"nil *DeviceTensor Download", func() error { _, err := (*flashattn.DeviceTensor)(nil).Download(); return err }, isDataError},
		{"zero DeviceTensor Download", func() error { _, err := (&flashattn.DeviceTensor{}).Download(); return err }, isDataError},
		{"zero DeviceTensor DownloadFP16", func() error { _, err := (&flashattn.DeviceTensor{}).DownloadFP16(); return err }, isDataError},
		{"zero DeviceTensor Free", func() error { return (&flashattn.DeviceTensor{}).Free() }, nil},
		{"nil *DeviceResult LSE", func() error { _, err := (*flashattn.DeviceResult)(nil).LSE(); return err }, isDataError},
		{"zero DeviceResult LSE", func() error { _, err := (&flashattn.DeviceResult{}).LSE(); return err }, isDataError},
		{"nil *DeviceResult Free", func() error { return (*flashattn.DeviceResult)(nil).Free() }, nil},
		{"nil *DeviceGrads Free", func() error { return (*flashattn.DeviceGrads)(nil).Free() }, nil},
		{"nil *RawForward Enqueue", func() error { return (*flashattn.RawForward)(nil).Enqueue(0, nil) }, isDataError},
		{"zero RawBackward Enqueue", func() error { return (&flashattn.RawBackward{}).Enqueue(0, nil) }, isDataError},
		{"nil *Stream Synchronize", func() error { return (*flashattn.Stream)(nil).Synchronize() }, isClosed},
		{"zero Stream Destroy", func() error { return (&flashattn.Stream{}).Destroy() }, nil},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = c.call()
		}()
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != nil && (err == nil || !c.want(err)):
			t.Errorf("%s: %v (%T), want a typed error", c.name, err, err)
		}
	}

	// Getters that cannot return an error give their documented zero result.
	noPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s: panic: %v", name, r)
			}
		}()
		f()
	}
	noPanic("nil *DeviceTensor Shape", func() {
		if s := (*flashattn.DeviceTensor)(nil).Shape(); s != (flashattn.Shape{}) {
			t.Errorf("nil *DeviceTensor Shape = %v, want the zero Shape", s)
		}
	})
	noPanic("nil *DeviceTensor DType", func() {
		if dt := (*flashattn.DeviceTensor)(nil).DType(); dt != 0 {
			t.Errorf("nil *DeviceTensor DType = %v, want 0", dt)
		}
	})
	noPanic("Dims Hkv 0 Groups", func() {
		bad := flashattn.Dims{B: 1, Nq: 4, Nk: 4, Hq: 2, Hkv: 0, D: 8}
		if g := bad.Groups(); g != 0 {
			t.Errorf("Groups with Hkv 0 = %d, want 0", g)
		}
		if h := bad.KVHead(1); h != -1 {
			t.Errorf("KVHead with Hkv 0 = %d, want -1", h)
		}
	})
	noPanic("nil *Tensor IsContiguous", func() {
		if (*flashattn.Tensor)(nil).IsContiguous() {
			t.Error("nil *Tensor IsContiguous = true")
		}
	})
	noPanic("nil *Tensor Offset", func() {
		if o := (*flashattn.Tensor)(nil).Offset(0, 0, 0, 0); o != -1 {
			t.Errorf("nil *Tensor Offset = %d, want -1", o)
		}
	})
	noPanic("At out of range", func() {
		for _, idx := range [][4]int{{1, 0, 0, 0}, {0, 4, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, 8}, {-1, 0, 0, 0}, {0, 0, 0, -1}} {
			if x := q.At(idx[0], idx[1], idx[2], idx[3]); x != 0 {
				t.Errorf("At%v of %v = %v, want 0", idx, q.Shape, x)
			}
		}
		if x := (*flashattn.Tensor)(nil).At(0, 0, 0, 0); x != 0 {
			t.Errorf("nil *Tensor At = %v, want 0", x)
		}
	})
	noPanic("Set out of range", func() {
		c := q.Clone()
		c.Set(0, 4, 0, 0, 7) // row 4 is outside the shape, inside Data: still refused
		c.Set(1, 0, 0, 0, 7)
		for i, x := range c.Data {
			if x != q.Data[i] {
				t.Fatalf("Set outside the shape wrote element %d", i)
			}
		}
		(*flashattn.Tensor)(nil).Set(0, 0, 0, 0, 1)
	})
	noPanic("Row on short data", func() {
		short := &flashattn.Tensor{Shape: d.QShape(), Strides: d.QShape().ContiguousStrides(), Data: q.Data[:d.QShape().Numel()-1]}
		if r := short.Row(0, d.Nq-1, d.Hq-1); r != nil {
			t.Errorf("Row past the data = %v, want nil", r)
		}
		if r := short.Row(0, 0, 0); len(r) != d.D {
			t.Errorf("Row inside the data = %v, want %d values", r, d.D)
		}
		strided := &flashattn.Tensor{Shape: d.QShape(), Strides: flashattn.Strides{64, 16, 8, 1}, Data: make([]float32, 60)}
		if r := strided.Row(0, 3, 1); r != nil {
			t.Errorf("strided Row past the data = %v, want nil", r)
		}
		if r := q.Row(0, d.Nq, 0); r != nil {
			t.Errorf("Row outside the shape = %v, want nil", r)
		}
	})
	noPanic("nil *Trace Kind", func() {
		if k, ok := (*flashattn.Trace)(nil).Kind(0, 0); ok || k != 0 {
			t.Errorf("nil *Trace Kind = %v, %t, want 0, false", k, ok)
		}
	})
}

// TestNewImpossibleShape: New of a shape Make refuses returns a tensor
// every method of which refuses without panicking, and every call given it
// returns Make's typed error.
func TestNewImpossibleShape(t *testing.T) {
	for _, s := range []flashattn.Shape{
		{B: 0, N: 2, H: 3, D: 4},
		{B: 1, N: -5, H: 3, D: 4},
		{B: 1 << 20, N: 1 << 20, H: 1 << 20, D: 1}, // overflows
	} {
		_, makeErr := flashattn.Make(s)
		if makeErr == nil {
			t.Fatalf("Make(%v) succeeded", s)
		}
		x := flashattn.New(s)
		if x == nil {
			t.Fatalf("New(%v) = nil", s)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("New(%v): a method panicked: %v", s, r)
				}
			}()
			if got := x.At(0, 0, 0, 0); got != 0 {
				t.Errorf("New(%v).At = %v, want 0", s, got)
			}
			x.Set(0, 0, 0, 0, 1)
			if r := x.Row(0, 0, 0); r != nil {
				t.Errorf("New(%v).Row = %v, want nil", s, r)
			}
			x.Fill(1)
			_ = x.Contiguous()
			_ = x.Clone()
			_ = x.IsContiguous()
		}()
		_, err := flashattn.Forward(x, x, x, &flashattn.Options{Backend: flashattn.CPUFlash})
		if err == nil || reflect.TypeOf(err) != reflect.TypeOf(makeErr) {
			t.Errorf("Forward(New(%v)): %v, want %T as Make gives (%v)", s, err, makeErr, makeErr)
		}
	}
}
