package flashattn

import (
	"fmt"
	"sync"
)

// The devices behind Auto and GPU, opened on first use and kept for the
// life of the process. A failure to open is kept too, with its reason: a
// driver or GPU does not appear while a process runs, and Auto then falls
// back to the CPU at the cost of a map lookup.
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
	e.once.Do(func() { e.dev, e.err = OpenDevice(ordinal) })
	return e.dev, e.err
}

// gpuFor returns the GPU implementation for problem p, or an error saying
// why the GPU cannot run it (wrapping ErrNoGPU, or an *UnsupportedError).
func gpuFor(p problem, o *Options, backward bool) (impl, string, error) {
	ordinal := 0
	if o != nil {
		ordinal = o.Device
	}
	if ordinal < 0 {
		return nil, "", &OptionError{Option: "Device", Value: fmt.Sprint(ordinal), Reason: "must be >= 0"}
	}
	dev, err := openDefault(ordinal)
	if err != nil {
		return nil, "", err
	}
	if o != nil && o.Trace != nil {
		return nil, "", &UnsupportedError{Backend: GPU, Feature: "option", Value: "Trace",
			Reason: "only the CPUFlash backend records traces"}
	}
	if backward {
		ks, err := dev.BackwardKernels(p.Dims, p.Causal)
		if err != nil {
			return nil, "", err
		}
		return gpuImpl{dev}, dev.reason(ks...), nil
	}
	k, err := dev.Kernel(p.Dims, p.Causal)
	if err != nil {
		return nil, "", err
	}
	return gpuImpl{dev}, dev.reason(k), nil
}

// reason is the Reason of a GPU result: the device and the kernels that ran.
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
	return s
}

// gpuImpl runs host-tensor calls on a device (Device.ForwardHost and
// BackwardHost without their checks, which Forward and Backward made).
type gpuImpl struct{ dev *Device }

func (g gpuImpl) forward(p problem, q, k, v *Tensor, _ *Options, out *Tensor, lse []float32) error {
	_, err := g.dev.forwardHost(p, q, k, v, out, lse)
	return err
}

func (g gpuImpl) backward(p problem, q, k, v, out, dOut *Tensor, lse []float32, _ *Options, dq, dk, dv *Tensor) error {
	_, err := g.dev.backwardHost(p, q, k, v, out, dOut, lse, dq, dk, dv)
	return err
}
