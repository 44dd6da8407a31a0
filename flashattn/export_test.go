package flashattn

import (
	"errors"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// LaunchFault makes a kernel fault on d, for the recovery test: it launches
// the forward kernel of dims once as Forward does, then again, one CTA, with
// Q at an address no allocation has (the null page), and waits, as Forward
// does, through Device.run. Test builds only.
func LaunchFault(d *Device, dims Dims) error {
	p, err := (&Options{}).resolve(dims)
	if err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	var ts []*DeviceTensor
	for _, s := range []Shape{p.QShape(), p.KVShape(), p.KVShape()} {
		t, err := d.alloc(s)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	op, err := d.newForward(p, ts[0], ts[1], ts[2])
	if err != nil {
		return err
	}
	// The frees fail once the context is lost; the fault is the answer.
	return errors.Join(d.run(faultOp{op}), op.free(), freeAll(ts))
}

// faultOp is a forward call whose second launch reads Q from address 4096.
type faultOp struct{ *fwdOp }

func (o faultOp) enqueue() error {
	if err := o.fwdOp.enqueue(); err != nil { // fills d.params; the driver copied them
		return err
	}
	d, ki := o.d, o.kern.info
	cfg := cuda.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{uint32(32 * ki.Warps), 1, 1}, SharedMem: uint32(ki.SmemBytes)}
	if o.kern.v.Arch == kernels.SM90A { // the Hopper forward: Q's tensor map at address 4096
		d.hparams.P.Q = 4096
		if err := encodeSM90A(d.tmaps, o.kern.v, d.hparams); err != nil {
			return err
		}
		return o.kern.fn.Launch(cfg, d.stream, d.hargs)
	}
	d.params.Q = 4096
	return o.kern.fn.Launch(cfg, d.stream, d.args)
}

// SetPersistentCTAs launches d's persistent kernels (KernelInfo.Persistent)
// with n CTAs instead of one per SM, so that small problems give each CTA
// several tiles and several rounds of the kernel's tile order; it returns
// the undo. Test builds only.
func SetPersistentCTAs(d *Device, n int) (undo func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.ctas
	d.ctas = n
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ctas = old
	}
}

// SetSharedMemoryOptin makes d choose its kernels as if its opt-in shared
// memory per block were n bytes, so an H100/H200 runs the <= 99 KiB rows an
// sm_86/89 runs (kernels.LargeFits), and returns the limit it had (pass it
// back to restore). Kernels are cached by symbol, so the choice follows at
// once. Test builds only.
func SetSharedMemoryOptin(d *Device, n int) (previous int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	previous, d.smemOptin = d.smemOptin, n
	return previous
}

// Profiled and ToolEnv: how Device.Bench knows a CUDA tool (profiled).
func Profiled() bool { return profiled() }

var ToolEnv = toolEnv
