package flashattn_test

import (
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestGPUConformance runs the suite on the GPU backend through the public
// API (Options.Backend = GPU), forward only: the GPU backward pass does not
// exist yet.
func TestGPUConformance(t *testing.T) {
	dev := openGPU(t)
	b := attntest.ForBackend(flashattn.GPU)
	b.Backward = nil
	b.HeadDims = dev.HeadDims()
	t.Logf("%s, head dims %v", dev.Info(), b.HeadDims)
	attntest.Run(t, b)
}

// TestGPUConformanceSM75 runs the suite on the Turing kernels, compiled by
// the driver from their compute_75 PTX, through the Device API.
func TestGPUConformanceSM75(t *testing.T) {
	dev := openGPU(t)
	if err := dev.ForceArch(75); err != nil {
		t.Fatal(err)
	}
	b := deviceBackend(dev, "gpu-sm75")
	b.HeadDims = dev.HeadDims()
	k, err := dev.Kernel(flashattn.Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: b.HeadDims[0]}, false)
	if err != nil {
		t.Fatal(err)
	}
	if k.Path != 75 || !k.FromPTX {
		t.Fatalf("forced sm_75 runs %+v", k)
	}
	t.Logf("%s, forced Turing path, head dims %v, e.g. %+v", dev.Info(), b.HeadDims, k)
	attntest.Run(t, b)
}

// deviceBackend runs Forward on dev: upload, Device.Forward, download.
func deviceBackend(dev *flashattn.Device, name string) attntest.Backend {
	return attntest.Backend{
		Name:      name,
		Precision: attntest.FP16,
		Forward: func(q, k, v *flashattn.Tensor, o *flashattn.Options) (res *flashattn.Result, err error) {
			d, err := flashattn.DimsOf(q, k, v)
			if err != nil {
				return nil, err
			}
			var ts []*flashattn.DeviceTensor
			defer func() {
				for _, t := range ts {
					if ferr := t.Free(); err == nil {
						err = ferr
					}
				}
			}()
			for _, x := range []*flashattn.Tensor{q, k, v} {
				dt, err := dev.Upload(x)
				if err != nil {
					return nil, err
				}
				ts = append(ts, dt)
			}
			r, err := dev.Forward(ts[0], ts[1], ts[2], o)
			if err != nil {
				return nil, err
			}
			defer r.Free()
			out, err := r.Out.Download()
			if err != nil {
				return nil, err
			}
			lse, err := r.LSE()
			if err != nil {
				return nil, err
			}
			return &flashattn.Result{Dims: d, Out: out, LSE: lse, Backend: flashattn.GPU, Reason: r.Kernel.Symbol}, nil
		},
	}
}
