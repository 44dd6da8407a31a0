package flashattn

import (
	"errors"
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

// gpuFor returns the GPU implementation for problem d, or an error saying
// why the GPU cannot run it (wrapping ErrNoGPU, or an *UnsupportedError).
func gpuFor(d Dims, o *Options, backward bool) (impl, string, error) {
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
	causal := o != nil && o.Causal
	if backward {
		ks, err := dev.BackwardKernels(d, causal)
		if err != nil {
			return nil, "", err
		}
		return gpuImpl{dev}, fmt.Sprintf("%s, kernels %s, %s, %s", dev.info, ks[0].Symbol, ks[1].Symbol, ks[2].Symbol), nil
	}
	k, err := dev.Kernel(d, causal)
	if err != nil {
		return nil, "", err
	}
	return gpuImpl{dev}, fmt.Sprintf("%s, kernel %s", dev.info, k.Symbol), nil
}

// gpuImpl runs one host-tensor call on a device: upload (fp16), forward,
// download, free.
type gpuImpl struct{ dev *Device }

func (g gpuImpl) forward(d Dims, q, k, v *Tensor, scale float64, o *Options, out *Tensor, lse []float32) (err error) {
	dev := g.dev
	var ts []*DeviceTensor
	defer func() {
		for _, t := range ts {
			err = errors.Join(err, t.Free())
		}
	}()
	for _, t := range []*Tensor{q, k, v} {
		dt, err := dev.Upload(t)
		if err != nil {
			return err
		}
		ts = append(ts, dt)
	}
	if err := dev.lock(); err != nil {
		return err
	}
	r, err := dev.forward(d, ts[0], ts[1], ts[2], scale, o != nil && o.Causal)
	dev.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	o16, err := r.Out.Download()
	if err != nil {
		return err
	}
	copy(out.Data, o16.Data)
	l, err := r.LSE()
	if err != nil {
		return err
	}
	copy(lse, l)
	return nil
}

// backward uploads the inputs (fp16) and the forward result, runs the
// backward kernels and downloads dQ, dK and dV.
func (g gpuImpl) backward(d Dims, q, k, v, out, dOut *Tensor, lse []float32, scale float64, o *Options, dq, dk, dv *Tensor) (err error) {
	dev := g.dev
	var ts []*DeviceTensor
	defer func() {
		for _, t := range ts {
			err = errors.Join(err, t.Free())
		}
	}()
	for _, t := range []*Tensor{q, k, v, dOut} {
		dt, err := dev.Upload(t)
		if err != nil {
			return err
		}
		ts = append(ts, dt)
	}
	fwd, err := dev.UploadResult(d, out, lse[:d.LSELen()])
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fwd.Free()) }()
	if err := dev.lock(); err != nil {
		return err
	}
	gr, err := dev.backward(d, ts[0], ts[1], ts[2], fwd.Out, fwd.lse, ts[3], scale, o != nil && o.Causal)
	dev.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, gr.Free()) }()
	for _, c := range []struct {
		src *DeviceTensor
		dst *Tensor
	}{{gr.DQ, dq}, {gr.DK, dk}, {gr.DV, dv}} {
		h, err := c.src.Download()
		if err != nil {
			return err
		}
		copy(c.dst.Data, h.Data)
	}
	return nil
}
