package flashattn

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/goflash/goflash/internal/cuda"
)

// The devices behind Auto and GPU, opened on first use and kept for the
// life of the process. A failure to open is kept too, with its reason: a
// driver or GPU does not appear while a process runs, and Auto then falls
// back to the CPU at the cost of a map lookup. A failure that passes is
// not kept (openPasses): a GPU whose memory another process holds (PyTorch
// beside a notebook), or one in exclusive use, is tried again next call.
var defaultDevices struct {
	mu sync.Mutex
	m  map[int]*defaultDevice
}

type defaultDevice struct {
	once sync.Once
	dev  *Device
	err  error
}

func openDefault(ordinal int) (*Device, error) {
	defaultDevices.mu.Lock()
	if defaultDevices.m == nil {
		defaultDevices.m = map[int]*defaultDevice{}
	}
	e := defaultDevices.m[ordinal]
	if e == nil {
		e = &defaultDevice{}
		defaultDevices.m[ordinal] = e
	}
	defaultDevices.mu.Unlock()
	e.once.Do(func() { e.dev, e.err = openDevice(ordinal) })
	if e.err != nil && openPasses(e.err) {
		defaultDevices.mu.Lock()
		if defaultDevices.m[ordinal] == e {
			delete(defaultDevices.m, ordinal)
		}
		defaultDevices.mu.Unlock()
	}
	return e.dev, e.err
}

// openDevice is OpenDevice (tests replace it).
var openDevice = OpenDevice

// openPasses reports whether a failure to open a device can pass while the
// process runs: out of device memory for the context, or the device in
// exclusive use by another process.
func openPasses(err error) bool {
	var ce *cuda.Error
	return errors.Is(err, cuda.ErrNoMemory) || errors.As(err, &ce) && ce.Code == cuda.ErrDevUnavailable
}

// lostDefault handles the error of a call on a default device: after a
// kernel fault (ErrContextLost) the device is forgotten and closed, so the
// next call tries to open it again; the driver refuses (the fault lasts as
// long as the process), that refusal is kept like any other, and Auto runs
// on the CPU saying why.
func lostDefault(dev *Device, err error) error {
	if !errors.Is(err, ErrContextLost) {
		return err
	}
	defaultDevices.mu.Lock()
	for o, e := range defaultDevices.m {
		if e.dev == dev {
			delete(defaultDevices.m, o)
		}
	}
	defaultDevices.mu.Unlock()
	return errors.Join(err, dev.Close())
}

// gpuFor returns the GPU implementation for problem p on inputs ins (named
// as argNames), or an error saying why the GPU cannot run it (wrapping
// ErrNoGPU; an *UnsupportedError; a *DataError for values fp16 cannot
// hold): every check the run would make is made here, so that Auto falls
// back to the CPU instead of failing.
func gpuFor(p problem, o *Options, backward bool, ins ...*Tensor) (impl, string, error) {
	ordinal := 0
	if o != nil {
		ordinal = o.Device
	}
	dev, err := openDefault(ordinal)
	if err != nil {
		return nil, "", err
	}
	ks, err := dev.kernelsFor(p, backward)
	if err != nil {
		return nil, "", err
	}
	for i, t := range ins {
		if err := checkFP16(argNames[i], t); err != nil {
			return nil, "", err
		}
	}
	return gpuImpl{dev}, dev.reason(ks...), nil
}

// modFeature names the first score modifier of p and its value, or "" when
// p has none (the plain kernels run it).
func (p problem) modFeature() (feature, value string) {
	switch {
	case p.Left >= 0 || p.Right > 0:
		return "sliding window", fmt.Sprintf("[%d, %d]", p.Left, p.Right)
	case p.Softcap != 0:
		return "softcap", fmt.Sprint(p.Softcap)
	case p.ALiBi != nil:
		return "ALiBi", fmt.Sprintf("%d slopes", len(p.ALiBi))
	}
	return "", ""
}

// mods reports whether p has a window, softcap or ALiBi: the forward runs
// a modified kernel (kernels.FwdMods).
func (p problem) mods() bool {
	f, _ := p.modFeature()
	return f != ""
}

// kernelsFor loads the kernels of a forward (or backward) call of p and
// checks that the device can run p.
func (d *Device) kernelsFor(p problem, backward bool) ([]KernelInfo, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r := planRequest{op: opForward, p: p, dt: FP16}
	switch {
	case p.entry == kvEntry:
		r.op = opDecode
	case backward:
		r.op = opBackward
	}
	_, ks, err := d.plan(r)
	if err != nil {
		return nil, err
	}
	return infos(ks), nil
}

// reason is the Reason of a GPU result: the device and the kernels that
// ran; d.mu is not held.
func (d *Device) reason(ks ...KernelInfo) string {
	s := d.info.String() + ", kernel"
	if len(ks) > 1 {
		s += "s"
	}
	for i, k := range ks {
		if i > 0 {
			s += ","
		}
		s += " " + k.Symbol
	}
	d.mu.Lock() // ForcePath and a failed load write it
	err := d.sm90aErr
	d.mu.Unlock()
	if err != nil {
		s += " (the Hopper kernels did not load: " + err.Error() + ")"
	}
	return s
}

// gpuImpl runs host-tensor calls on a device (Device.ForwardHost and
// BackwardHost without their checks, which Forward and Backward made).
type gpuImpl struct{ dev *Device }

// hostBytes is what the host side of a call allocates beyond its outputs:
// the fp16 copies of the inputs on their way up, of the outputs on their
// way down.
func (gpuImpl) hostBytes(p problem, _ *Options, backward bool) float64 {
	q, kv := float64(p.QShape().Numel()), float64(p.KVShape().Numel())
	if backward {
		return 2 * (3*q + 2*kv + q + 2*kv) // q, k, v, out, dOut up; dQ, dK, dV down
	}
	return 2 * (q + 2*kv + q) // q, k, v up; O down
}

func (g gpuImpl) forward(_ context.Context, p problem, q, k, v *Tensor, _ *Options, out *Tensor, lse []float32) error {
	_, err := g.dev.forwardHost(p, q, k, v, out, lse)
	return lostDefault(g.dev, err)
}

func (g gpuImpl) backward(_ context.Context, p problem, q, k, v, out, dOut *Tensor, lse []float32, _ *Options, dq, dk, dv *Tensor) error {
	_, err := g.dev.backwardHost(p, q, k, v, out, dOut, lse, dq, dk, dv)
	return lostDefault(g.dev, err)
}
