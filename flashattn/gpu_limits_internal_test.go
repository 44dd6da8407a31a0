package flashattn

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// noContextDevice is an H100's Device without a CUDA context: only what
// answers before the first driver call (the launch-limit checks, the
// kernel choice) runs on it, so these tests need no GPU.
func noContextDevice() *Device {
	return &Device{path: 80, maxGridY: 65535, smemOptin: 227 << 10, smemPerSM: 228 << 10,
		info: DeviceInfo{Name: "no-context H100", Major: 9, Minor: 0, SMs: 132}, funcs: map[string]*loadedKernel{}}
}

// TestDecodeGridPerKVHead: decode launches one CTA row per (batch, kv head),
// its query heads packed as rows, so a serving batch whose B*Hq exceeds
// grid y while B*Hkv does not is not refused (Auto would have run it on
// the CPU); the forward of the same heads is, and decode past B*Hkv is.
func TestDecodeGridPerKVHead(t *testing.T) {
	d := noContextDevice()
	lens := make([]int, 1024)
	for i := range lens {
		lens[i] = 200
	}
	q, kc := Shape{B: 1024, N: 1, H: 64, D: 128}, Shape{B: 1024, N: 256, H: 8, D: 128} // B*Hq 65536, B*Hkv 8192
	p, err := resolveKVShapes(q, kc, kc, KVCache{SeqLens: lens}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := d.planDevice()
	if err := c.checkProblem(p); err != nil {
		t.Errorf("decode, B*Hkv 8192: %v", err)
	}
	var ue *UnsupportedError
	p.entry = ""
	if err := c.checkProblem(p); !errors.As(err, &ue) || ue.Feature != "B*Hq" {
		t.Errorf("forward, B*Hq 65536: %v, want the B*Hq refusal", err)
	}
	q.H, kc.H = 512, 512 // MHA at 512 heads: B*Hkv 524288
	if p, err = resolveKVShapes(q, kc, kc, KVCache{SeqLens: lens}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.checkProblem(p); !errors.As(err, &ue) || ue.Feature != "B*Hkv" {
		t.Errorf("decode, B*Hkv 524288: %v, want the B*Hkv refusal", err)
	}
}

// TestOrderedD256TooManyKeyBlocks: the ordered single pass is D 256's only
// deterministic backward on the sm_80 path; past grid y's key blocks it is
// refused for that, not for a head dim it has.
func TestOrderedD256TooManyKeyBlocks(t *testing.T) {
	d := noContextDevice()
	c := d.planDevice()
	v, ok := c.lookup(kernels.Key{Stage: kernels.BwdDKDVQ, Ordered: true, HeadDim: 256})
	if !ok || !kernels.HeadsFastest(v) {
		t.Fatalf("no heads-fastest ordered D256 pass on %s: %+v", d.info, v)
	}
	dims := Dims{B: 1, Nq: 128, Nk: d.maxGridY*v.Bc + 1, Hq: 1, Hkv: 1, D: 256}
	_, err := planOf(c, planRequest{op: opBwdKernels, p: problem{Dims: dims, Left: -1, Right: -1, Deterministic: true}, dt: FP16})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Feature != "deterministic" {
		t.Errorf("Nk %d: %v, want the ordered pass's key-block refusal", dims.Nk, err)
	}
}

// TestReasonWhileForcePath: a result's Reason reads what ForcePath writes
// (run with -race to see a missing lock).
func TestReasonWhileForcePath(t *testing.T) {
	d := noContextDevice()
	d.info.Major, d.info.Minor = 7, 5 // ForcePath then makes no driver call
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 200 {
			d.mu.Lock()
			d.path = 80 // so that ForcePath(0) resets the path, sm90aErr included
			d.mu.Unlock()
			_ = d.ForcePath(0)
		}
	})
	for range 200 {
		if r := d.reason(KernelInfo{Symbol: "k"}); r == "" {
			t.Fatal("empty reason")
		}
	}
	wg.Wait()
}

// TestDefaultDeviceRetriesPassingFailures: a default device that failed to
// open for want of memory (another process holds it) or because another
// process uses it exclusively is tried again on the next call; a missing
// driver is remembered.
func TestDefaultDeviceRetriesPassingFailures(t *testing.T) {
	open := openDevice
	t.Cleanup(func() {
		openDevice = open
		defaultDevices.mu.Lock()
		delete(defaultDevices.m, 7)
		defaultDevices.mu.Unlock()
	})
	for _, c := range []struct {
		err       error
		wantCalls int
	}{
		{&cuda.Error{Func: "cuDevicePrimaryCtxRetain", Code: cuda.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}, 3},
		{&cuda.Error{Func: "cuDevicePrimaryCtxRetain", Code: cuda.ErrDevUnavailable, Name: "CUDA_ERROR_DEVICE_UNAVAILABLE"}, 3},
		{fmt.Errorf("%w: no driver", ErrNoGPU), 1},
	} {
		calls := 0
		openDevice = func(int) (*Device, error) { calls++; return nil, c.err }
		defaultDevices.mu.Lock()
		delete(defaultDevices.m, 7)
		defaultDevices.mu.Unlock()
		for range 3 {
			if _, err := openDefault(7); !errors.Is(err, c.err) {
				t.Fatalf("openDefault: %v, want %v", err, c.err)
			}
		}
		if calls != c.wantCalls {
			t.Errorf("%v: opened %d times in 3 calls, want %d", c.err, calls, c.wantCalls)
		}
	}
}

// TestDevicesListsTheReadableOnes: one GPU in exclusive use elsewhere (or
// out of memory) leaves the others listed; none readable is ErrNoGPU with
// each one's reason.
func TestDevicesListsTheReadableOnes(t *testing.T) {
	count, read := deviceCount, readDevice
	t.Cleanup(func() { deviceCount, readDevice = count, read })
	busy := &cuda.Error{Func: "cuDevicePrimaryCtxRetain", Code: cuda.ErrDevUnavailable, Name: "CUDA_ERROR_DEVICE_UNAVAILABLE"}
	deviceCount = func() (int, error) { return 2, nil }
	readDevice = func(i int) (DeviceInfo, error) {
		if i == 1 {
			return DeviceInfo{}, busy
		}
		return DeviceInfo{Ordinal: i, Name: "T4", Major: 7, Minor: 5}, nil
	}
	if ds, err := Devices(); err != nil || len(ds) != 1 || ds[0].Ordinal != 0 {
		t.Errorf("one of two busy: %+v, %v; want GPU 0 listed", ds, err)
	}
	readDevice = func(int) (DeviceInfo, error) { return DeviceInfo{}, busy }
	if ds, err := Devices(); !errors.Is(err, ErrNoGPU) || !errors.Is(err, busy) || ds != nil {
		t.Errorf("both busy: %+v, %v; want ErrNoGPU with the reason", ds, err)
	}
}

// TestDriverTooOldSaysVersions: a module the driver refuses for its image
// or PTX names the driver's CUDA version and the one the image was built
// by; other load errors add nothing.
func TestDriverTooOldSaysVersions(t *testing.T) {
	ptx := &cuda.Error{Func: "cuModuleLoadDataEx", Code: cuda.ErrUnsupportedPTX, Name: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}
	if got := driverTooOld(ptx, 11040, "fatbin", kernels.FatbinCUDA); !strings.Contains(got, "CUDA 11.4") || !strings.Contains(got, "CUDA "+kernels.FatbinCUDA) {
		t.Errorf("unsupported PTX on a CUDA 11.4 driver: %q", got)
	}
	oom := &cuda.Error{Func: "cuModuleLoadDataEx", Code: cuda.ErrOutOfMemory}
	if got := driverTooOld(fmt.Errorf("x: %w", oom), 12020, "fatbin", kernels.FatbinCUDA); got != "" {
		t.Errorf("out of memory: %q, want nothing added", got)
	}
}
