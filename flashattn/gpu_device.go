package flashattn

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// ErrDeviceClosed is returned by the methods of a closed Device and of its
// tensors.
var ErrDeviceClosed = errors.New("flashattn: device is closed")

// ErrContextLost is wrapped by the error of a GPU call whose kernel faulted
// (an illegal address, a trap), by every later call on that Device, and by
// OpenDevice of that GPU afterwards: the CUDA driver keeps such a fault for
// the rest of the process (every Device of the GPU shares its context), so
// only a new process can use that GPU again. Close still frees what the
// Device holds on the host; Forward and Backward with Auto run on the CPU
// and say why.
var ErrContextLost = cuda.ErrContextLost

// ErrFreed is returned when a freed DeviceTensor or DeviceResult is used.
var ErrFreed = errors.New("flashattn: device tensor was freed")

// DeviceInfo describes one CUDA device.
type DeviceInfo struct {
	Ordinal       int
	Name          string
	Major, Minor  int    // compute capability
	TotalMem      uint64 // bytes
	FreeMem       uint64 // bytes free when the info was read
	DriverVersion int    // CUDA version the driver supports, 1000*major + 10*minor
	SMs           int    // multiprocessors
}

// Arch is the compute capability as one number: 75 for sm_75, 90 for sm_90.
func (i DeviceInfo) Arch() int { return 10*i.Major + i.Minor }

func (i DeviceInfo) String() string {
	return fmt.Sprintf("GPU %d: %s (sm_%d%d)", i.Ordinal, i.Name, i.Major, i.Minor)
}

// noGPU wraps a driver error that means "nothing to run on" in ErrNoGPU.
func noGPU(err error) error {
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		return fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return err
}

// Devices lists the CUDA devices. Without a driver or a device the error
// wraps ErrNoGPU. A device that cannot be read now (in exclusive use by
// another process, its memory full, a fault) is left out when others can
// be (Ordinal says which are listed); when none can, the error says why
// for each.
func Devices() ([]DeviceInfo, error) {
	n, err := deviceCount()
	if err != nil {
		return nil, noGPU(err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the CUDA driver sees no device", ErrNoGPU)
	}
	out := make([]DeviceInfo, 0, n)
	var errs []error
	for i := range n {
		info, err := readDevice(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		out = append(out, info)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, errors.Join(errs...))
	}
	return out, nil
}

// deviceCount and readDevice are the driver's answers Devices lists (tests
// replace them).
var deviceCount, readDevice = cuda.DeviceCount, deviceInfo

// deviceInfo reads device i's DeviceInfo through a context of its own.
func deviceInfo(i int) (DeviceInfo, error) {
	c, err := cuda.Open(i)
	if err != nil {
		return DeviceInfo{}, err
	}
	info, err := readInfo(c)
	return info, errors.Join(err, c.Close())
}

func readInfo(c *cuda.Context) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: c.Ordinal()}
	var err error
	var errs []error
	info.Name, err = c.Name()
	errs = append(errs, err)
	info.Major, info.Minor, err = c.ComputeCapability()
	errs = append(errs, err)
	info.SMs, err = c.Attribute(cuda.AttrMultiprocessorCount)
	errs = append(errs, err)
	info.FreeMem, info.TotalMem, err = c.MemInfo()
	errs = append(errs, err)
	info.DriverVersion, err = cuda.DriverVersion()
	errs = append(errs, err)
	return info, errors.Join(errs...)
}

// Device is an open CUDA device: its context, its loaded FA2 kernels and
// every buffer allocated on it. A Device is safe for concurrent use; calls
// run one at a time. Close frees everything it owns.
type Device struct {
	mu       sync.Mutex
	ctx      *cuda.Context
	info     DeviceInfo
	stream   *cuda.Stream
	maxGridY int
	// smemOptin is the shared memory per block a kernel may opt in to
	// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN): it decides
	// whether the table's Large rows run here (kernels.LargeFits).
	smemOptin int
	// smemPerSM is the shared memory of one SM
	// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR): how many
	// decode CTAs one SM holds (decodePerSM).
	smemPerSM int

	// path is the kernel path in use: 75 (Turing code) or 80 (sm_80+ code).
	// forced is set by ForcePath(75) on a newer GPU: the Turing code then
	// comes from its compute_75 PTX through the driver's JIT.
	path   int
	forced bool
	// sm90a: dense fp16 and bf16 forwards, plain or with a window, softcap or ALiBi,
	// run the Hopper kernels (Arch 90 keys, from the ImageSM90A module) on
	// a compute capability 9.0 device
	// whose driver encodes TMA tensor maps, unless ForcePath(80) or 75.
	sm90a    bool
	sm90aErr error // why a 9.0 device runs the sm_80 path after all (the cubin did not load), or nil
	mods     [kernels.NumImages]*cuda.Module
	funcs    map[string]*loadedKernel
	rung     int // a kernel-ladder rung 1-4 that Forward runs instead (UseRung); 0: the shipped kernels
	// nvrtc: the rungs whose edited sources Forward runs (LoadRungSource, gpu_nvrtc.go).
	nvrtc map[int]*nvrtcRung
	// ctas is the grid of the persistent kernels (KernelInfo.Persistent):
	// one CTA per SM; internal tests set fewer, so that small problems
	// still give each CTA several tiles.
	ctas int

	// One parameter block per launch contract, reused by every launch
	// (calls are serialised by mu; the driver copies the values at launch).
	params   *kernels.FwdParams
	args     *cuda.Args
	hparams  *kernels.Sm90FwdArgs // the Hopper forward's (tensor maps + FwdParams)
	hargs    *cuda.Args
	tmaps    *cuda.TensorMapEncoder // encodes the Hopper kernels' tensor maps (raw plans' too)
	bparams  *kernels.BwdParams
	bargs    *cuda.Args
	hbparams *kernels.Sm90BwdArgs // the Hopper backward's (tensor maps + BwdParams)
	hbargs   *cuda.Args

	closed bool
}

type loadedKernel struct {
	mod  *cuda.Module // the module fn is in (one of Device.mods)
	fn   *cuda.Function
	v    kernels.Variant // its row of the table
	info KernelInfo
}

// OpenDevice opens CUDA device ordinal. It fails with an error wrapping
// ErrNoGPU without a driver or device, and with an *UnsupportedError on a
// GPU older than Turing (sm_75). A program built with the goflash_nogpu tag
// has no kernels to run: the error wraps ErrNoGPU and ErrNoKernels, before
// any driver is loaded.
func OpenDevice(ordinal int) (*Device, error) {
	if !kernels.Embedded {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, ErrNoKernels)
	}
	c, err := cuda.Open(ordinal)
	if err != nil {
		return nil, noGPU(err)
	}
	d := &Device{ctx: c, funcs: map[string]*loadedKernel{}}
	fail := func(err error) (*Device, error) { return nil, errors.Join(err, c.Close()) }
	if d.info, err = readInfo(c); err != nil {
		return fail(err)
	}
	if d.info.Arch() < 75 {
		return fail(&UnsupportedError{Backend: GPU, Feature: "compute capability", Value: fmt.Sprintf("sm_%d", d.info.Arch()),
			Reason: fmt.Sprintf("%s: the FA2 kernels need Turing (sm_75) or newer", d.info)})
	}
	if d.maxGridY, err = c.Attribute(cuda.AttrMaxGridDimY); err != nil {
		return fail(err)
	}
	if d.smemOptin, err = c.Attribute(cuda.AttrMaxSharedPerBlockOpt); err != nil {
		return fail(err)
	}
	if d.smemPerSM, err = c.Attribute(cuda.AttrMaxSharedPerSM); err != nil {
		return fail(err)
	}
	if d.stream, err = c.NewStream(); err != nil {
		return fail(err)
	}
	d.path = kernels.Path(d.info.Arch())
	d.sm90a = hasSM90A(d.info.Arch())
	d.ctas = d.info.SMs
	d.params = new(kernels.FwdParams)
	d.args = cuda.NewArgs(unsafe.Pointer(d.params))
	d.hparams = new(kernels.Sm90FwdArgs)
	d.hargs = cuda.NewArgs(unsafe.Pointer(d.hparams))
	d.tmaps = d.ctx.NewTensorMapEncoder()
	d.bparams = new(kernels.BwdParams)
	d.bargs = cuda.NewArgs(unsafe.Pointer(d.bparams))
	d.hbparams = new(kernels.Sm90BwdArgs)
	d.hbargs = cuda.NewArgs(unsafe.Pointer(d.hbparams))
	return d, nil
}

// hasSM90A says whether a device of compute capability cc runs the Hopper
// kernels: sm_90a SASS runs on 9.0 alone, and its launches need a driver
// that encodes TMA tensor maps (CUDA 12+).
func hasSM90A(cc int) bool { return cc == kernels.SM90A && cuda.HasTensorMaps() }

// Info describes the device (FreeMem as of OpenDevice).
func (d *Device) Info() DeviceInfo {
	if d == nil {
		return DeviceInfo{}
	}
	return d.info
}

// Close frees every buffer, kernel module and stream of the device and
// releases its context; after a kernel fault (ErrContextLost) it resets and
// releases the context instead (the GPU stays unusable in this process).
// Tensors of a closed device return ErrDeviceClosed or ErrFreed. A second Close returns nil. A nil *Device, or a zero
// Device (one not made by OpenDevice), acts as a closed one: Close returns
// nil, the other methods ErrDeviceClosed (the getters their zero results).
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.ctx == nil {
		d.closed = true
		return nil
	}
	d.closed = true
	err := d.ctx.Close()
	d.funcs, d.mods = nil, [kernels.NumImages]*cuda.Module{} // the context's destruction unloaded them
	return err
}

// errZeroDevice is ErrDeviceClosed for a Device not made by OpenDevice.
var errZeroDevice = fmt.Errorf("%w (a zero Device: use OpenDevice)", ErrDeviceClosed)

// lock takes the device for one call; it fails on a closed device, and on
// a zero one (no context: not made by OpenDevice).
func (d *Device) lock() error {
	if d == nil {
		return ErrDeviceClosed
	}
	d.mu.Lock()
	if d.ctx == nil {
		d.mu.Unlock()
		return errZeroDevice
	}
	if d.closed {
		d.mu.Unlock()
		return ErrDeviceClosed
	}
	return nil
}

// ForcePath selects the kernel path: 75 runs the Turing (sm_75) kernels,
// compiled from their compute_75 PTX by the driver, so that the Turing code
// can be tested on a newer GPU; 80 on an H100/H200 runs the sm_80 (mma.sync)
// kernels instead of the Hopper ones (wgmma and TMA, KernelInfo.Path 90),
// which dense fp16 and bf16 forwards and unmodified backwards there run by
// default (at their head dims, but for short causal forwards where the
// sm_80 kernel is faster: HopperKernelTable's SM80CausalMaxNk); 0 returns to the device's
// own path. 80 is accepted on every sm_80+ device and 90 on an sm_90 one
// whose driver can run the Hopper kernels (as 0). A path is the code a
// kernel is written for (KernelInfo.Path), not the compute capability of
// the device it runs on (DeviceInfo.Arch).
func (d *Device) ForcePath(path int) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	own, hopper := kernels.Path(d.info.Arch()), hasSM90A(d.info.Arch())
	use, forced, sm90a := own, false, hopper
	switch {
	case path == 0 || path == kernels.SM90A && hopper:
	case path == own:
		sm90a = false
	case path == 75:
		use, forced, sm90a = 75, true, false
	default:
		can := fmt.Sprintf("path 75 (forced Turing PTX) or %d", own)
		if hopper {
			can += " or 90 (its default)"
		}
		return &UnsupportedError{Backend: GPU, Feature: "kernel path", Value: fmt.Sprint(path),
			Reason: fmt.Sprintf("%s can run %s", d.info, can)}
	}
	if use == d.path && forced == d.forced && sm90a == d.sm90a {
		return nil
	}
	// Every module goes, whatever an unload says: a module kept after a
	// failed unload of another would leave dead functions in d.funcs.
	var errs []error
	for _, m := range d.mods {
		if m != nil {
			errs = append(errs, m.Unload())
		}
	}
	d.mods, d.funcs = [kernels.NumImages]*cuda.Module{}, map[string]*loadedKernel{}
	d.path, d.forced, d.sm90a, d.sm90aErr = use, forced, sm90a, nil
	return errors.Join(errs...)
}

// ForceArch is ForcePath under its first name, kept for existing callers.
//
// Deprecated: use ForcePath; "arch" names a compute capability elsewhere.
func (d *Device) ForceArch(path int) error { return d.ForcePath(path) }

// planHeadDims lists the head dims at which the plan of req succeeds on d
// (planDevice.headDims) with its shipped kernels or ladder rung: an NVRTC
// build of a rung keeps the rung's head dims, unless nvrtc (the raw
// forward, which refuses such a build, asks with it); d.mu is held.
func (d *Device) planHeadDims(nvrtc bool, req func(hd int) planRequest) []int {
	c := d.planDevice()
	if !nvrtc {
		c.nvrtc = nil
	}
	return c.headDims(req)
}

// module returns the module that holds variant v, its family's image
// (kernels.ImageOf: the Hopper cubin for an Arch 90 row), loading it into
// d.mods on first use; forced, a family's Turing PTX instead; d.mu is held.
func (d *Device) module(v kernels.Variant) (*cuda.Module, error) {
	im, ok := kernels.ImageOf(v.Symbol)
	if !ok {
		return nil, fmt.Errorf("flashattn: kernel %s is in no kernel image", v.Symbol)
	}
	img, what := im.Bytes(), im.String()+" fatbin"
	switch {
	case im == kernels.ImageSM90A:
		what = "sm_90a cubin"
	case d.forced:
		img, what = im.SM75PTX(), im.String()+" compute_75 PTX"
	}
	if d.mods[im] == nil {
		m, err := d.ctx.LoadModule(img)
		if err != nil {
			return nil, fmt.Errorf("flashattn: loading the FA2 kernels (%s) on %s: %w%s", what, d.info, err, driverTooOld(err, d.info.DriverVersion, what, im.CUDA()))
		}
		d.mods[im] = m
	}
	return d.mods[im], nil
}

// shipped says whether m is a module the device has loaded from the
// embedded images (ForcePath unloads them all; an NVRTC-compiled rung's
// module is not one); d.mu is held.
func (d *Device) shipped(m *cuda.Module) bool {
	return m != nil && slices.Contains(d.mods[:], m)
}

// driverTooOld is what a module load's error adds when the driver may be
// older than the image needs: its CUDA version beside the one the image
// was built by; "" for other errors.
func driverTooOld(err error, driver int, what, built string) string {
	var ce *cuda.Error
	if !errors.As(err, &ce) {
		return ""
	}
	switch ce.Code {
	case cuda.ErrInvalidImage, cuda.ErrNoBinaryForGPU, cuda.ErrInvalidPTX, cuda.ErrUnsupportedPTX:
		return fmt.Sprintf(" (this driver supports CUDA %d.%d; the %s was built by CUDA %s's nvcc: a driver that old or newer is needed)", driver/1000, driver%1000/10, what, built)
	}
	return ""
}

// load returns variant v's function, loading the module and preparing the
// function on first use; d.mu is held.
func (d *Device) load(v kernels.Variant) (*loadedKernel, error) {
	if k := d.funcs[v.Symbol]; k != nil {
		return k, nil
	}
	mod, err := d.module(v)
	if err != nil {
		return nil, err
	}
	info := kernelInfo(v)
	info.FromPTX = d.forced && v.Arch != kernels.SM90A
	if v.Arch == 0 { // a ladder rung: the same code on both paths, from the module of this one
		info.Path = d.path
	}
	k, err := d.function(mod, v, info)
	if err != nil {
		return nil, err
	}
	d.funcs[v.Symbol] = k
	return k, nil
}

// function looks up kernel v of mod (an image's or an NVRTC build's),
// allows it its dynamic shared memory (above 48 KiB a launch needs the
// opt-in) and reads what the driver made of it into info; d.mu is held.
func (d *Device) function(mod *cuda.Module, v kernels.Variant, info KernelInfo) (*loadedKernel, error) {
	fn, err := mod.Function(v.Symbol)
	if err != nil {
		return nil, fmt.Errorf("flashattn: kernel %s on %s: %w", v.Symbol, d.info, err)
	}
	if v.SmemBytes > 48<<10 {
		if err := fn.SetMaxDynamicSharedMem(v.SmemBytes); err != nil {
			return nil, fmt.Errorf("flashattn: kernel %s needs %d bytes of shared memory on %s: %w", v.Symbol, v.SmemBytes, d.info, err)
		}
	}
	k := &loadedKernel{mod: mod, fn: fn, v: v, info: info}
	var errs []error
	k.info.Registers, err = fn.Attribute(cuda.FuncNumRegs)
	errs = append(errs, err)
	k.info.LocalBytes, err = fn.Attribute(cuda.FuncLocalSizeBytes)
	errs = append(errs, err)
	k.info.BinaryArch, err = fn.Attribute(cuda.FuncBinaryVersion)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return k, nil
}
