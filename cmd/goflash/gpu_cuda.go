package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
)

// cudaGPU is a gpuDevice on flashattn's CUDA device API.
type cudaGPU struct {
	dev  *flashattn.Device
	path int // kernel path forced with ForcePath (0: the device's own)
}

// openGPU and listGPUs reach the GPUs; tests replace them with a fake
// device to run the GPU code paths of demo, bench and check anywhere.
var (
	openGPU  = openCUDA
	listGPUs = listCUDA
)

// openCUDA opens GPU ordinal, or says why there is none (an error wrapping
// flashattn.ErrNoGPU, or an *UnsupportedError for a GPU older than sm_75).
func openCUDA(ordinal int) (gpuDevice, error) {
	dev, err := flashattn.OpenDevice(ordinal)
	if err != nil {
		return nil, err
	}
	return &cudaGPU{dev: dev}, nil
}

// listCUDA describes every GPU, or says why there is none.
func listCUDA() ([]DeviceMeta, error) {
	infos, err := flashattn.Devices()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceMeta, len(infos))
	for i, in := range infos {
		out[i] = deviceMeta(in)
	}
	return out, nil
}

func deviceMeta(in flashattn.DeviceInfo) DeviceMeta {
	return DeviceMeta{Kind: "gpu", Ordinal: in.Ordinal, Name: in.Name, Arch: in.Arch(), SMs: in.SMs,
		Capability: fmt.Sprintf("%d.%d", in.Major, in.Minor), Memory: int64(in.TotalMem),
		Driver: driverString(in.DriverVersion)}
}

// driverString is the kernel driver's version where Linux says it (for
// example "580.95.05"), with the CUDA version the driver supports.
func driverString(cudaVersion int) string {
	cv := fmt.Sprintf("CUDA %d.%d", cudaVersion/1000, cudaVersion%1000/10)
	if b, err := os.ReadFile("/proc/driver/nvidia/version"); err == nil {
		if v := kernelModuleVersion(string(b)); v != "" {
			return v + " (" + cv + ")"
		}
	}
	return cv
}

// kernelModuleVersion finds the driver version in /proc/driver/nvidia/version,
// whose wording varies ("... Kernel Module  580.95.05  Tue ...", "... Open
// Kernel Module for x86_64  580.159.04  Release Build ..."): the first word of
// the NVRM line made of digits and at least one dot.
func kernelModuleVersion(proc string) string {
	line, _, _ := strings.Cut(proc, "\n")
	for _, w := range strings.Fields(line) {
		if strings.Contains(w, ".") && strings.Trim(w, "0123456789.") == "" {
			return w
		}
	}
	return ""
}

func (g *cudaGPU) Meta() DeviceMeta { return deviceMeta(g.dev.Info()) }
func (g *cudaGPU) Close()           { g.dev.Close() }

// Use switches the kernel path; switching reloads the kernel module, so
// callers group their work by path.
func (g *cudaGPU) Use(path int) error {
	if path == g.path {
		return nil
	}
	if err := g.dev.ForcePath(path); err != nil {
		return err
	}
	g.path = path
	return nil
}

func (g *cudaGPU) UseRung(path, rung int, src string) (func(), error) {
	if err := g.Use(path); err != nil {
		return nil, err
	}
	if err := g.dev.UseRung(rung); err != nil {
		return nil, err
	}
	shipped := len(flashattn.Ladder())
	if src != "" {
		if _, err := g.dev.LoadRungSource(rung, src); err != nil {
			g.dev.UseRung(shipped)
			return nil, err
		}
	}
	return func() {
		if src != "" {
			g.dev.ResetRungSource(rung)
		}
		g.dev.UseRung(shipped)
	}, nil
}

func (g *cudaGPU) KernelStats(c Case) (flashattn.KernelStats, error) {
	ks, err := g.dev.Kernels(flashattn.OpForward, c.Dims, flashattn.FP16, &flashattn.Options{Causal: c.Causal})
	if err != nil {
		return flashattn.KernelStats{}, err
	}
	return ks[0], nil
}

func (g *cudaGPU) HasBackward() (bool, string) {
	if len(g.dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil)) == 0 {
		return false, "this device has no GPU backward kernels"
	}
	return true, ""
}

func (g *cudaGPU) Bench(c Case, dir string, path int, deterministic bool, dt flashattn.DType, mods scoreMods, warmup, reps int) Row {
	d := c.Dims
	impl := gpuImplName(path, g.dev.Info().Arch())
	row := Row{Impl: impl, Direction: dir, Shape: bench.ShapeOf(d, c.Causal), FLOPs: d.FLOPs(c.Causal)}
	if err := g.Use(path); err != nil {
		return failed(row, err)
	}
	if dir == dirDecode {
		return g.benchDecode(c, row, mods, warmup, reps)
	}
	op, opts := flashattn.OpForward, &flashattn.Options{Causal: c.Causal, Deterministic: deterministic}
	mods.apply(opts, d.Hq)
	switch dir {
	case dirBwd:
		row.FLOPs = d.BackwardFLOPs(c.Causal)
		op = flashattn.OpBackward
	case dirFwdBwd:
		row.FLOPs += d.BackwardFLOPs(c.Causal)
		op = flashattn.OpForwardBackward
	}
	r, err := g.dev.Bench(op, d, dt, opts, flashattn.BenchConfig{Warmup: warmup, Reps: reps})
	var ue *flashattn.UnsupportedError
	if errors.As(err, &ue) {
		row.Status, row.Reason = statusUnsupported, strings.TrimPrefix(err.Error(), "flashattn: ")
		return row
	}
	if err != nil {
		return failed(row, err)
	}
	row.Status, row.MS, row.TFLOPs = statusOK, r.MedianMs, r.TFLOPS
	row.ExtraBytes, row.HostOverheadUS, row.Kernel = r.ExtraBytes, r.HostOverheadUs, r.Kernel.Symbol
	row.LaunchTimed = !r.EnqueueHidden
	row.LaunchUS, row.BeyondLaunchUS = r.LaunchUs, r.BeyondLaunchUs
	return row
}

func (g *cudaGPU) Kernels(path int) ([]KernelRow, error) {
	if err := g.Use(path); err != nil {
		return nil, err
	}
	var out []KernelRow
	for _, hd := range g.dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil) {
		for _, causal := range []bool{false, true} {
			dims := flashattn.Dims{B: 1, Nq: 128, Nk: 128, Hq: 1, Hkv: 1, D: hd}
			ks, err := g.dev.Kernels(flashattn.OpForward, dims, flashattn.FP16, &flashattn.Options{Causal: causal})
			kr := KernelRow{KernelInfo: flashattn.KernelInfo{HeadDim: hd, Causal: causal}}
			if err != nil {
				kr.Error = oneLine(err.Error())
			} else {
				kr.KernelInfo = ks[0].KernelInfo
			}
			out = append(out, kr)
		}
	}
	return out, nil
}

func (g *cudaGPU) Forward(q, k, v *flashattn.Tensor, causal bool, path int, dt flashattn.DType) (res *flashattn.Result, err error) {
	if err := g.Use(path); err != nil {
		return nil, err
	}
	o := &flashattn.Options{Causal: causal}
	if dt == flashattn.FP16 {
		return g.dev.ForwardHost(q, k, v, o)
	}
	d, err := flashattn.DimsOf(q, k, v)
	if err != nil {
		return nil, err
	}
	in, free, err := g.uploadAs(dt, q, k, v)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, free()) }()
	r, err := g.dev.Forward(in[0], in[1], in[2], o)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	if r.Out.DType() != dt || r.Kernel.DType != dt {
		return nil, fmt.Errorf("%v inputs ran %s (%v)", dt, r.Kernel.Symbol, r.Kernel.DType)
	}
	res = &flashattn.Result{Dims: d, Backend: flashattn.GPU, Reason: r.Kernel.Symbol}
	if res.Out, err = r.Out.Download(); err != nil {
		return nil, err
	}
	res.LSE, err = r.LSE()
	return res, err
}

func (g *cudaGPU) Backward(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool, path int, dt flashattn.DType) (gr *flashattn.Grads, err error) {
	if err := g.Use(path); err != nil {
		return nil, err
	}
	o := &flashattn.Options{Causal: causal}
	if dt == flashattn.FP16 {
		return g.dev.BackwardHost(q, k, v, out, dOut, lse, o)
	}
	d, err := flashattn.DimsOf(q, k, v)
	if err != nil {
		return nil, err
	}
	in, free, err := g.uploadAs(dt, q, k, v, dOut)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, free()) }()
	fwd, err := g.dev.UploadResultAs(d, out, lse, dt)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, fwd.Free()) }()
	dg, err := g.dev.Backward(in[0], in[1], in[2], fwd, in[3], o)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dg.Free()) }()
	gr = &flashattn.Grads{Backend: flashattn.GPU}
	for i, x := range []struct {
		src *flashattn.DeviceTensor
		dst **flashattn.Tensor
	}{{dg.DQ, &gr.DQ}, {dg.DK, &gr.DK}, {dg.DV, &gr.DV}} {
		if x.src.DType() != dt || dg.Kernels[i].DType != dt {
			return nil, fmt.Errorf("%v inputs ran %s (%v)", dt, dg.Kernels[i].Symbol, dg.Kernels[i].DType)
		}
		if *x.dst, err = x.src.Download(); err != nil {
			return nil, err
		}
	}
	return gr, nil
}

// uploadAs uploads xs as device tensors of dt; free releases every one
// uploaded (on an error too, the ones before it).
func (g *cudaGPU) uploadAs(dt flashattn.DType, xs ...*flashattn.Tensor) (ds []*flashattn.DeviceTensor, free func() error, err error) {
	free = func() error {
		var errs []error
		for _, d := range ds {
			errs = append(errs, d.Free())
		}
		return errors.Join(errs...)
	}
	for _, x := range xs {
		d, err := g.dev.UploadAs(x, dt)
		if err != nil {
			return nil, nil, errors.Join(err, free())
		}
		ds = append(ds, d)
	}
	return ds, free, nil
}
