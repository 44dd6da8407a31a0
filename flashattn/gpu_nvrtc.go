package flashattn

import (
	"errors"
	"fmt"
	"maps"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
	"github.com/goflash/goflash/internal/nvrtc"
)

// nvrtcRung is a rung whose kernels the Device runs from a source compiled
// by NVRTC (LoadRungSource) instead of the fatbin's.
type nvrtcRung struct {
	rung  int
	files map[string]string // the edited kernel files
	arch  int               // what mod was compiled for (d.nvrtcArch when it was loaded)
	build *RungBuild
	mod   *cuda.Module
	funcs map[string]*loadedKernel // by symbol
}

// LoadRungSource compiles src with NVRTC as the source of ladder rung rung
// (RungFile(rung): rungs 1-4 the teaching kernels, len(Ladder()) the shipped
// forward, fwd.cuh), loads it, and makes Forward (and Bench and Kernels of
// OpForward) run it, as UseRung(rung) does: the kernels keep their names,
// parameters and launch (FwdParams, the tile the source declares), so every
// check and benchmark runs the edited kernel as it ran the shipped one. The
// edit stays until ResetRungSource; UseRung moves between rungs without
// dropping it.
//
// It compiles for the device's architecture (compute_75 after ForcePath(75);
// the newest the NVRTC knows where it is older than the GPU), through a
// cache keyed by the sources, options, architecture and NVRTC release, and
// returns the build with each kernel's registers, shared memory and
// occupancy. A source with errors is a *CompileError (NVRTC's log, each
// error's line quoted); without NVRTC the error wraps ErrNoNVRTC and says
// what to install. A loaded shipped kernel (the last rung) replaces the
// fp16 forward without score modifiers, on an H100/H200 the Hopper kernel
// too (the source is the sm_80 path's).
func (d *Device) LoadRungSource(rung int, src string) (*RungBuild, error) {
	return d.LoadRungFiles(rung, map[string]string{RungFile(rung): src})
}

// LoadRungFiles is LoadRungSource with any kernel files edited: files maps
// names relative to kernels/ (KernelSourceNames: RungFile(rung),
// "traits.cuh", ...) to their text; the others are as shipped. Only the
// rung's kernels are compiled from them: editing traits.cuh's tile rows
// changes the shipped kernel (rung len(Ladder())), its Swizzle every rung
// from 4 up, and nothing else the device runs.
func (d *Device) LoadRungFiles(rung int, files map[string]string) (*RungBuild, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	arch, path, err := d.nvrtcTarget()
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	files = maps.Clone(files)
	b, err := compileRung(rung, files, arch, path) // outside the lock: NVRTC takes seconds
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r := &nvrtcRung{rung: rung, files: files}
	if err := d.loadBuild(r, b, arch); err != nil {
		return nil, err
	}
	if old := d.nvrtc[rung]; old != nil && old.mod != nil {
		if err := old.mod.Unload(); err != nil {
			return nil, errors.Join(err, r.mod.Unload())
		}
	}
	if d.nvrtc == nil {
		d.nvrtc = map[int]*nvrtcRung{}
	}
	d.nvrtc[rung] = r
	if rung == len(ladder) {
		d.rung = 0
	} else {
		d.rung = rung
	}
	return r.copyBuild(), nil
}

// ResetRungSource makes rung run its shipped kernels again (a rung without
// a LoadRungSource edit is left as it is). The rung in use does not change.
func (d *Device) ResetRungSource(rung int) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	r := d.nvrtc[rung]
	if r == nil {
		return nil
	}
	delete(d.nvrtc, rung)
	if r.mod != nil {
		return r.mod.Unload()
	}
	return nil
}

// RungSourceBuild returns the build rung runs from an edited source
// (LoadRungSource, recompiled after a ForcePath), nil when it runs the
// shipped kernels.
func (d *Device) RungSourceBuild(rung int) *RungBuild {
	if d.lock() != nil {
		return nil
	}
	defer d.mu.Unlock()
	if r := d.nvrtc[rung]; r != nil {
		return r.copyBuild()
	}
	return nil
}

func (r *nvrtcRung) copyBuild() *RungBuild {
	b := *r.build
	b.Kernels = append([]KernelStats(nil), r.build.Kernels...)
	b.Edited = append([]string(nil), r.build.Edited...)
	return &b
}

// nvrtcTarget is the compute_XX and kernel path a rung compiles for on d: the
// device's own architecture on its path, or compute_75 on the forced Turing
// path; where the NVRTC is older than the GPU, the newest architecture it
// knows, if that can run the path's code (PTX runs on newer GPUs). d.mu is held.
func (d *Device) nvrtcTarget() (arch, path int, err error) {
	arch, path = d.info.Arch(), d.path
	if d.forced {
		arch = 75
	}
	lib, err := loadNVRTC()
	if err != nil {
		return 0, 0, err
	}
	if lib.Supports(arch) {
		return arch, path, nil
	}
	best := 0
	for _, a := range lib.SupportedArchs() {
		if a <= arch && a >= path && a > best {
			best = a
		}
	}
	if best == 0 {
		return 0, 0, &nvrtc.ArchError{Arch: arch, Version: lib.VersionString(), Supported: lib.SupportedArchs()}
	}
	return best, path, nil
}

// loadBuild loads b's PTX as r's module for compute_arch and prepares every
// kernel of it; d.mu is held. On failure nothing stays loaded.
func (d *Device) loadBuild(r *nvrtcRung, b *RungBuild, arch int) error {
	mod, err := d.ctx.LoadModule([]byte(b.PTX))
	if err != nil {
		return fmt.Errorf("flashattn: loading rung %d's NVRTC PTX (compute_%d, NVRTC %s) on %s: %w%s", b.Rung, b.Arch, b.NVRTC, d.info, err,
			ptxTooNew(err, d.info.DriverVersion, b.NVRTC))
	}
	funcs := map[string]*loadedKernel{}
	for i, ks := range b.Kernels {
		k, err := d.prepare(mod, ks.KernelInfo)
		if err != nil {
			return errors.Join(err, mod.Unload())
		}
		funcs[ks.Symbol] = k
		if b.Kernels[i], err = d.stats(k); err != nil {
			return errors.Join(err, mod.Unload())
		}
		b.Kernels[i].NVRTC = true
	}
	r.arch, r.build, r.mod, r.funcs = arch, b, mod, funcs
	return nil
}

// ptxTooNew is what a PTX load's error adds when the NVRTC may be newer
// than the driver, whose JIT then does not know its PTX version; "" for
// other errors.
func ptxTooNew(err error, driver int, nvrtcVersion string) string {
	var ce *cuda.Error
	if !errors.As(err, &ce) || (ce.Code != cuda.ErrUnsupportedPTX && ce.Code != cuda.ErrInvalidPTX && ce.Code != cuda.ErrInvalidImage) {
		return ""
	}
	return fmt.Sprintf(" (this driver supports CUDA %d.%d; PTX from NVRTC %s needs a driver of that CUDA release or newer: "+
		"point %s at an NVRTC no newer than the driver)", driver/1000, driver%1000/10, nvrtcVersion, nvrtc.LibraryEnv)
}

// prepare looks up one kernel of an NVRTC module and allows its dynamic
// shared memory; d.mu is held.
func (d *Device) prepare(mod *cuda.Module, ki KernelInfo) (*loadedKernel, error) {
	if ki.SmemBytes > d.smemOptin {
		return nil, &UnsupportedError{Backend: GPU, Feature: "shared memory", Value: fmt.Sprintf("%d bytes", ki.SmemBytes),
			Reason: fmt.Sprintf("%s's tile needs more than the %d bytes per CTA %s allows", ki.Symbol, d.smemOptin, d.info)}
	}
	v := kernels.Variant{Key: kernels.Key{Stage: kernels.Fwd, Arch: ki.Path, HeadDim: ki.HeadDim, Causal: ki.Causal, Rung: ki.Rung},
		Symbol: ki.Symbol, Br: ki.Br, Bc: ki.Bc, Warps: ki.Warps, SmemBytes: ki.SmemBytes}
	return d.function(mod, v, ki)
}

// stats reads a loaded kernel's shared memory and occupancy; d.mu is held.
func (d *Device) stats(k *loadedKernel) (KernelStats, error) {
	s := KernelStats{KernelInfo: k.info, Loaded: true}
	for _, r := range d.nvrtc {
		s.NVRTC = s.NVRTC || (r.mod != nil && r.mod == k.mod)
	}
	threads := 32 * k.info.Warps
	var errs []error
	var err error
	s.StaticSmemBytes, err = k.fn.Attribute(cuda.FuncSharedSizeBytes)
	errs = append(errs, err)
	s.MaxThreadsPerBlock, err = k.fn.Attribute(cuda.FuncMaxThreadsPerBlock)
	errs = append(errs, err)
	s.BlocksPerSM, err = k.fn.MaxActiveBlocksPerSM(threads, k.info.SmemBytes)
	errs = append(errs, err)
	perSM, err := d.ctx.Attribute(cuda.AttrMaxThreadsPerSM)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return KernelStats{}, err
	}
	s.WarpsPerSM = s.BlocksPerSM * threads / 32
	if perSM > 0 {
		s.Occupancy = float64(s.WarpsPerSM) / float64(perSM/32)
	}
	return s, nil
}

// nvrtcSync makes the edited rung in use current: a rung loaded for
// another path or architecture (a ForcePath since) is compiled again, from
// the cache where it can be; changed says it was. d.mu is held.
func (d *Device) nvrtcSync() (changed bool, err error) {
	r := d.nvrtcRungInUse()
	arch, path, err := d.nvrtcTarget()
	if err != nil || arch == r.arch && path == r.build.Path {
		return false, err
	}
	b, err := compileRung(r.rung, r.files, arch, path)
	if err != nil {
		return false, err
	}
	old := r.mod
	if err := d.loadBuild(r, b, arch); err != nil {
		return false, err
	}
	if old != nil {
		if err := old.Unload(); err != nil {
			return true, err
		}
	}
	return true, nil
}
