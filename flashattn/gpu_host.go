package flashattn

import (
	"errors"
	"fmt"
)

// The *Host methods run a Device call on host tensors, as the package's
// Forward, Backward and their varlen and KV-cache siblings do with the GPU
// backend, but on this device and its kernel path: each checks its
// arguments, reserves the host memory it will use, and makes one round trip
// (upload fp16, run, download) that frees every device buffer on return.

// ForwardHost is Forward for host tensors, as flashattn.Forward with the
// GPU backend runs it, but on this device (with its kernel path, see
// ForcePath): upload (fp16), Forward, download. All device memory is freed
// on return; Result.Reason names the device and the kernel.
func (d *Device) ForwardHost(q, k, v *Tensor, o *Options) (*Result, error) {
	if err := noTrace(o, "a GPU call"); err != nil {
		return nil, err
	}
	p, err := checkForward(q, k, v, o)
	if err != nil {
		return nil, err
	}
	if err := reserveCall(GPU, gpuImpl{d}, p, o, false); err != nil {
		return nil, err
	}
	return d.hostForward(p, func(out *Tensor, lse []float32) ([]KernelInfo, error) {
		return d.forwardHost(p, q, k, v, out, lse)
	})
}

// ForwardVarlenHost is ForwardVarlen for host tensors, as
// flashattn.ForwardVarlen with the GPU backend runs it, but on this device
// (with its kernel path, see ForcePath): upload (fp16), one varlen launch,
// download. All device memory is freed on return; Result.Reason names the
// device and the kernel.
func (d *Device) ForwardVarlenHost(q, k, v *Tensor, vl Varlen, o *Options) (*Result, error) {
	c, err := resolveVarlen(q, k, v, vl, o)
	if err != nil {
		return nil, err
	}
	if err := reserveVarlen("ForwardVarlen", c, false); err != nil {
		return nil, err
	}
	return d.hostForward(c.p, func(out *Tensor, lse []float32) ([]KernelInfo, error) {
		return d.forwardHost(c.p, q, k, v, out, lse)
	})
}

// ForwardKVCacheHost is ForwardKVCache for host tensors, as
// flashattn.ForwardKVCache with the GPU backend runs it, but on this device
// (with its kernel path, see ForcePath): upload (fp16), Device.ForwardKVCache,
// download. All device memory is freed on return; Result.Reason names the
// device and the kernels.
func (d *Device) ForwardKVCacheHost(q, kCache, vCache *Tensor, c KVCache, o *Options) (*Result, error) {
	kc, err := resolveKVCache(q, kCache, vCache, c, o)
	if err != nil {
		return nil, err
	}
	dm := kc.p.Dims
	if err := reserve(fmt.Sprintf("ForwardKVCache of %+v on %s", dm, GPU), floats(dm.QShape().Numel(), dm.LSELen())+decodeHostBytes(kc)); err != nil {
		return nil, err
	}
	return d.hostForward(kc.p, func(out *Tensor, lse []float32) ([]KernelInfo, error) {
		return d.roundTrip([]string{"q", "kCache", "vCache"}, []*Tensor{q, kCache, vCache}, []*Tensor{out}, lse,
			func(in []*DeviceTensor) (hostOutputs, error) {
				if err := d.lock(); err != nil {
					return hostOutputs{}, err
				}
				r, ks, err := d.decode(kc.p, kc.c, in[0], in[1], in[2])
				d.mu.Unlock()
				if err != nil {
					return hostOutputs{}, err
				}
				return hostOutputs{ts: []*DeviceTensor{r.Out}, res: r, ks: ks, free: r.Free}, nil
			})
	})
}

// BackwardHost is Backward for host tensors, as flashattn.Backward with the
// GPU backend runs it, but on this device (with its kernel path, see
// ForcePath): upload (fp16) the inputs and the forward result, Backward,
// download. All device memory is freed on return; Grads.Reason names the
// device and the kernels.
func (d *Device) BackwardHost(q, k, v, out, dOut *Tensor, lse []float32, o *Options) (*Grads, error) {
	o = o.withoutTrace() // a backward call ignores it (BackwardContext)
	p, err := checkBackward(q, k, v, out, dOut, lse, o)
	if err != nil {
		return nil, err
	}
	if err := reserveCall(GPU, gpuImpl{d}, p, o, true); err != nil {
		return nil, err
	}
	return d.hostBackward(p, q, k, v, out, dOut, lse)
}

// BackwardVarlenHost is BackwardVarlen for host tensors, as
// flashattn.BackwardVarlen with the GPU backend runs it, but on this device
// (with its kernel path, see ForcePath): upload (fp16), the three varlen
// launches, download. All device memory is freed on return; Grads.Reason
// names the device and the kernels.
func (d *Device) BackwardVarlenHost(q, k, v, out, dOut *Tensor, lse []float32, vl Varlen, o *Options) (*Grads, error) {
	c, err := resolveVarlen(q, k, v, vl, o)
	if err != nil {
		return nil, err
	}
	if err := checkOutputs(c.p.Dims, out, dOut); err != nil {
		return nil, err
	}
	if _, err := c.p.Dims.checkLSE(lse); err != nil {
		return nil, err
	}
	if _, err := c.seqLSEs(lse); err != nil {
		return nil, err
	}
	if err := reserveVarlen("BackwardVarlen", c, true); err != nil {
		return nil, err
	}
	return d.hostBackward(c.p, q, k, v, out, dOut, lse)
}

// reserveVarlen reserves the host memory of a varlen *Host call: its
// outputs and varlenHostBytes.
func reserveVarlen(what string, c varlenCall, backward bool) error {
	dm := c.p.Dims
	out := floats(dm.QShape().Numel(), dm.LSELen())
	if backward {
		out = floats(dm.QShape().Numel(), 2*dm.KVShape().Numel())
	}
	return reserve(fmt.Sprintf("%s of %+v in %d sequences on %s", what, dm, c.vl.Seqs(), GPU), out+varlenHostBytes(c, backward))
}

// hostForward allocates a forward call's O and LSE on the host, fills them
// by run (a round trip) and returns them with the device and the kernels
// that ran as the Reason.
func (d *Device) hostForward(p problem, run func(out *Tensor, lse []float32) ([]KernelInfo, error)) (*Result, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	out, lse := newOutput(p.QShape()), newBuffer(p.LSELen())
	ks, err := run(out, lse)
	if err != nil {
		return nil, err
	}
	return &Result{Dims: p.Dims, Out: out, LSE: lse, Backend: GPU, Reason: d.reason(ks...)}, nil
}

// hostBackward allocates a backward call's gradients on the host, fills
// them by backwardHost and returns them with the device and the kernels
// that ran as the Reason.
func (d *Device) hostBackward(p problem, q, k, v, out, dOut *Tensor, lse []float32) (*Grads, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	g := &Grads{DQ: newOutput(p.QShape()), DK: newOutput(p.KVShape()), DV: newOutput(p.KVShape()), Backend: GPU}
	ks, err := d.backwardHost(p, q, k, v, out, dOut, lse, g.DQ, g.DK, g.DV)
	if err != nil {
		return nil, err
	}
	g.Reason = d.reason(ks...)
	return g, nil
}

// forwardHost uploads q, k and v, runs the forward pass and downloads O and
// the LSE into out and lse; it returns the kernel that ran.
func (d *Device) forwardHost(p problem, q, k, v, out *Tensor, lse []float32) ([]KernelInfo, error) {
	return d.roundTrip(argNames[:3], []*Tensor{q, k, v}, []*Tensor{out}, lse, func(in []*DeviceTensor) (hostOutputs, error) {
		if err := d.lock(); err != nil {
			return hostOutputs{}, err
		}
		r, err := d.forward(p, in[0], in[1], in[2])
		d.mu.Unlock()
		if err != nil {
			return hostOutputs{}, err
		}
		return hostOutputs{ts: []*DeviceTensor{r.Out}, res: r, ks: []KernelInfo{r.Kernel}, free: r.Free}, nil
	})
}

// backwardHost uploads the inputs and the forward result, runs the backward
// pass and downloads the gradients into dq, dk and dv; it returns the
// kernels that ran.
func (d *Device) backwardHost(p problem, q, k, v, out, dOut *Tensor, lse []float32, dq, dk, dv *Tensor) ([]KernelInfo, error) {
	return d.roundTrip([]string{"q", "k", "v", "dOut"}, []*Tensor{q, k, v, dOut}, []*Tensor{dq, dk, dv}, nil, func(in []*DeviceTensor) (hostOutputs, error) {
		fwd, err := d.uploadResult(p.Dims, out, lse, FP16)
		if err != nil {
			return hostOutputs{}, err
		}
		if err := d.lock(); err != nil {
			return hostOutputs{}, errors.Join(err, fwd.Free())
		}
		gr, err := d.backward(p, in[0], in[1], in[2], fwd, in[3])
		d.mu.Unlock()
		if err != nil {
			return hostOutputs{}, errors.Join(err, fwd.Free())
		}
		free := func() error { return errors.Join(gr.Free(), fwd.Free()) }
		return hostOutputs{ts: []*DeviceTensor{gr.DQ, gr.DK, gr.DV}, ks: gr.Kernels, free: free}, nil
	})
}

// hostOutputs is what the run of a round trip leaves on the device: the
// tensors to download, in order, the result whose LSE to download (nil:
// none), the kernels that ran, and what frees them all.
type hostOutputs struct {
	ts   []*DeviceTensor
	res  *DeviceResult
	ks   []KernelInfo
	free func() error
}

// roundTrip is the one upload, run and download of the *Host methods and
// of the GPU backend behind the package's calls: it uploads ins as fp16
// (naming ins[i] args[i] in errors), runs run on them (which takes d.mu
// itself), downloads what it returns into dst, in order, and its LSE into
// lse, and frees every device buffer on return, on failure too. It returns
// the kernels that ran.
func (d *Device) roundTrip(args []string, ins, dst []*Tensor, lse []float32, run func(in []*DeviceTensor) (hostOutputs, error)) (ks []KernelInfo, err error) {
	in, err := d.uploadAll(args, ins...)
	defer func() { err = errors.Join(err, freeAll(in)) }()
	if err != nil {
		return nil, err
	}
	out, err := run(in)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, out.free()) }()
	for i, t := range out.ts {
		if err := t.downloadInto(dst[i].Data); err != nil {
			return nil, err
		}
	}
	if out.res != nil {
		if err := out.res.lseInto(lse); err != nil {
			return nil, err
		}
	}
	return out.ks, nil
}
