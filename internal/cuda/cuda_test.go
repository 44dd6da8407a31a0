package cuda

import (
	_ "embed"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

//go:embed testdata/testkernels.ptx
var testPTX []byte

func TestLoadMissingLibrary(t *testing.T) {
	_, err := load("libgoflash-no-such-driver.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("load of a missing library: %v, want an error wrapping ErrNoDriver", err)
	}
}

// TestLibraryPaths: the library by name first, then the directories hosted
// runtimes keep it in; GOFLASH_LIBCUDA alone when set. A load that finds
// none says each path it tried and names the variable.
func TestLibraryPaths(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	ps := libraryPaths(getenv)
	if ps[0] != libraryName || len(ps) != 1+len(libraryDirs) {
		t.Errorf("paths %q, want %s then libraryDirs", ps, libraryName)
	}
	env[LibraryEnv] = "/opt/driver/libcuda.so.1"
	if ps := libraryPaths(getenv); len(ps) != 1 || ps[0] != "/opt/driver/libcuda.so.1" {
		t.Errorf("with %s set: %q", LibraryEnv, ps)
	}
	_, err := load("libgoflash-none-1.so", "/nonexistent/libgoflash-none-2.so")
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cannot load libgoflash-none-1.so") || !strings.Contains(err.Error(), "nor from /nonexistent ("+LibraryEnv) {
		t.Errorf("load of two missing paths: %v", err)
	}
	// The first path that opens is the one bound (libc: no cuInit, said as such).
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		if _, err := load("libgoflash-none-1.so", "libc.so.6"); !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cuInit") {
			t.Errorf("load falling through to libc: %v, want its missing cuInit", err)
		}
	}
}

func TestLoadLibraryWithoutSymbols(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("libc test library is Linux's")
	}
	_, err := load("libc.so.6")
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cuInit") {
		t.Fatalf("load of libc: %v, want ErrNoDriver naming the missing cuInit", err)
	}
}

func TestErrorMatchesSentinels(t *testing.T) {
	for _, c := range []struct {
		code                         Result
		driver, device, memory, lost bool
	}{
		{ErrNoDeviceCode, false, true, false, false}, {ErrInvalidDevice, false, true, false, false}, {ErrInsufficientDrv, true, false, false, false},
		{ErrStubLibrary, true, false, false, false}, {ErrOutOfMemory, false, false, true, false},
		{ErrIllegalAddress, false, false, false, true}, {ErrLaunchFailed, false, false, false, true}, {ErrMisaligned, false, false, false, true},
		{ErrECCUncorrected, false, false, false, true},
		{701, false, false, false, false}, // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: the launch is refused, the context lives
	} {
		e := error(&Error{Func: "cuX", Code: c.code})
		if errors.Is(e, ErrNoDriver) != c.driver || errors.Is(e, ErrNoDevice) != c.device || errors.Is(e, ErrNoMemory) != c.memory || errors.Is(e, ErrContextLost) != c.lost {
			t.Errorf("code %d: Is(ErrNoDriver)=%v Is(ErrNoDevice)=%v Is(ErrNoMemory)=%v Is(ErrContextLost)=%v, want %v %v %v %v",
				c.code, errors.Is(e, ErrNoDriver), errors.Is(e, ErrNoDevice), errors.Is(e, ErrNoMemory), errors.Is(e, ErrContextLost), c.driver, c.device, c.memory, c.lost)
		}
	}
}

// Whatever this machine has, the default driver either works or fails with
// a sentinel; nothing panics.
func TestDefaultDriverIsCleanEitherWay(t *testing.T) {
	err := Init()
	if err != nil {
		if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Init: %v, want nil or a sentinel", err)
		}
		if _, err2 := Open(0); !errors.Is(err2, ErrNoDriver) && !errors.Is(err2, ErrNoDevice) {
			t.Fatalf("Open without a driver: %v", err2)
		}
		if _, err2 := DeviceCount(); err2 == nil {
			t.Fatal("DeviceCount without a driver succeeded")
		}
		t.Logf("no GPU here: %v", err)
		return
	}
	if _, err := Open(1 << 20); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open of a huge ordinal: %v, want ErrNoDevice", err)
	}
}

// gpu opens device 0 or skips the test.
func gpu(t testing.TB) *Context {
	t.Helper()
	if n, err := DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device: %v", err)
	}
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func testModule(t *testing.T, c *Context) *Module {
	t.Helper()
	m, err := c.LoadModule(testPTX)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGPUDeviceQueries(t *testing.T) {
	c := gpu(t)
	name, err := c.Name()
	if err != nil || name == "" {
		t.Fatalf("Name: %q %v", name, err)
	}
	major, minor, err := c.ComputeCapability()
	if err != nil || major < 3 {
		t.Fatalf("ComputeCapability: %d.%d %v", major, minor, err)
	}
	total, err := c.TotalMem()
	if err != nil || total == 0 {
		t.Fatalf("TotalMem: %d %v", total, err)
	}
	free, total2, err := c.MemInfo()
	if err != nil || total2 != total || free == 0 || free > total {
		t.Fatalf("MemInfo: free %d total %d (TotalMem %d) %v", free, total2, total, err)
	}
	v, err := DriverVersion()
	if err != nil || v < 11000 {
		t.Fatalf("DriverVersion: %d %v", v, err)
	}
	t.Logf("%s sm_%d%d, %d MiB, driver API %d, elapsed via %s", name, major, minor, total>>20, v, c.d.elapsedName)
}

func TestGPUVecAdd(t *testing.T) {
	c := gpu(t)
	f, err := testModule(t, c).Function("vec_add")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 255, 1 << 20} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(i), float32(2*i+1)
		}
		bytes := 4 * n
		da, _ := c.Alloc(bytes)
		db, _ := c.Alloc(bytes)
		dc, err := c.Alloc(bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := CopyToDevice(da, a); err != nil {
			t.Fatal(err)
		}
		if err := CopyToDevice(db, b); err != nil {
			t.Fatal(err)
		}
		if err := dc.Memset32(math.Float32bits(float32(math.NaN())), n); err != nil {
			t.Fatal(err)
		}
		pa, pb, pc, nn := da.Ptr(), db.Ptr(), dc.Ptr(), int32(n)
		args := NewArgs(unsafe.Pointer(&pa), unsafe.Pointer(&pb), unsafe.Pointer(&pc), unsafe.Pointer(&nn))
		err = f.Launch(LaunchConfig{Grid: [3]uint32{uint32((n + 127) / 128), 1, 1}, Block: [3]uint32{128, 1, 1}}, nil, args)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		if err := CopyFromDevice(got, dc); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != a[i]+b[i] {
				t.Fatalf("n=%d: c[%d] = %v, want %v", n, i, got[i], a[i]+b[i])
			}
		}
		for _, x := range []*Buffer{da, db, dc} {
			if err := x.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// echoParams mirrors struct EchoParams in testdata/testkernels.cu.
type echoParams struct {
	Out uint64
	X   int64
	N   int32
	S   float32
}

func TestGPUStructParamAndStream(t *testing.T) {
	c := gpu(t)
	f, err := testModule(t, c).Function("echo_params")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Alloc(12)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	p := &echoParams{Out: out.Ptr()}
	args := NewArgs(unsafe.Pointer(p))
	// The same pinned block serves several launches with new values.
	for i := range 3 {
		p.X, p.N, p.S = int64(1000+i), int32(-7*i), 0.25*float32(i)
		if err := f.Launch(LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}, s, args); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 3)
		if err := CopyFromDevice(got, out); err != nil {
			t.Fatal(err)
		}
		if want := []float32{float32(p.X), float32(p.N), p.S}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("launch %d: kernel read %v, want %v", i, got, want)
		}
	}
}

func TestGPUDynamicSharedMemoryAttribute(t *testing.T) {
	c := gpu(t)
	f, err := testModule(t, c).Function("smem_sum")
	if err != nil {
		t.Fatal(err)
	}
	optin, err := c.Attribute(AttrMaxSharedPerBlockOpt)
	if err != nil {
		t.Fatal(err)
	}
	if optin <= 48<<10 {
		t.Skipf("device allows only %d bytes of shared memory per block", optin)
	}
	bytes := optin &^ 1023
	out, _ := c.Alloc(4)
	ptr, words := out.Ptr(), int32(bytes/4)
	args := NewArgs(unsafe.Pointer(&ptr), unsafe.Pointer(&words))
	cfg := LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{256, 1, 1}, SharedMem: uint32(bytes)}
	err = f.Launch(cfg, nil, args)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("launch with %d bytes of shared memory before raising the limit: %v, want a CUDA error", bytes, err)
	}
	t.Logf("refused as expected: %v", err)
	if err := f.SetMaxDynamicSharedMem(bytes); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Attribute(FuncMaxDynamicSharedMem); err != nil || got != bytes {
		t.Fatalf("attribute reads %d %v, want %d", got, err, bytes)
	}
	if err := f.Launch(cfg, nil, args); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 1)
	if err := CopyFromDevice(got, out); err != nil {
		t.Fatal(err)
	}
	if got[0] != float32(words) {
		t.Fatalf("sum %v, want %v", got[0], words)
	}
}

func TestGPUErrors(t *testing.T) {
	c := gpu(t)
	m := testModule(t, c)
	_, err := m.Function("no_such_kernel")
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_NOT_FOUND" {
		t.Fatalf("missing symbol: %v, want CUDA_ERROR_NOT_FOUND", err)
	}
	_, err = c.LoadModule([]byte(".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry broken( { bogus; }\n"))
	if !errors.As(err, &ce) {
		t.Fatalf("invalid PTX: %v, want a CUDA error", err)
	}
	t.Logf("invalid PTX: %v", err)
	if _, err := c.Alloc(1 << 62); !errors.As(err, &ce) || ce.Code != ErrOutOfMemory || !errors.Is(err, ErrNoMemory) {
		t.Fatalf("huge Alloc: %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
	}
	b, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatalf("second Free: %v", err)
	}
	if err := CopyToDevice(b, []float32{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("copy into a freed buffer: %v, want ErrClosed", err)
	}
	b2, _ := c.Alloc(16)
	if err := CopyToDevice(b2, make([]float32, 5)); err == nil {
		t.Fatal("copy of 20 bytes into 16 succeeded")
	}
}

func TestGPUEventsTimeAKernel(t *testing.T) {
	c := gpu(t)
	f, err := testModule(t, c).Function("vec_add")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 24
	da, _ := c.Alloc(4 * n)
	db, _ := c.Alloc(4 * n)
	dc, err := c.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb, pc, nn := da.Ptr(), db.Ptr(), dc.Ptr(), int32(n)
	args := NewArgs(unsafe.Pointer(&pa), unsafe.Pointer(&pb), unsafe.Pointer(&pc), unsafe.Pointer(&nn))
	s, _ := c.NewStream()
	e0, _ := c.NewEvent()
	e1, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	cfg := LaunchConfig{Grid: [3]uint32{n / 256, 1, 1}, Block: [3]uint32{256, 1, 1}}
	for _, step := range []func() error{
		func() error { return e0.Record(s) },
		func() error { return f.Launch(cfg, s, args) },
		func() error { return e1.Record(s) },
		e1.Synchronize,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := Elapsed(e0, e1)
	if err != nil || ms <= 0 || ms > 1000 {
		t.Fatalf("Elapsed %v ms, %v", ms, err)
	}
	t.Logf("vec_add of 2^24 floats: %.3f ms, %.0f GB/s", ms, 12*n/float64(ms)/1e6)
}

// Goroutines move between OS threads: calls from many goroutines at once
// must each find the context current.
func TestGPUManyGoroutines(t *testing.T) {
	c := gpu(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				b, err := c.Alloc(1024)
				if err != nil {
					errs <- err
					return
				}
				want := make([]int32, 256)
				for j := range want {
					want[j] = int32(g*100000 + i*1000 + j)
				}
				got := make([]int32, 256)
				if err := CopyToDevice(b, want); err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := CopyFromDevice(got, b); err != nil {
					errs <- err
					return
				}
				for j := range got {
					if got[j] != want[j] {
						errs <- errors.New("round trip mismatch")
						return
					}
				}
				if err := b.Free(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestGPUCloseReleasesEverything(t *testing.T) {
	if n, err := DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device: %v", err)
	}
	// A context kept open by this test keeps the primary context alive, so
	// free memory is comparable before and after.
	keep := gpu(t)
	free0, _, err := keep.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30
	if _, err := c.Alloc(size); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadModule(testPTX); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewStream(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewEvent(); err != nil {
		t.Fatal(err)
	}
	free1, _, _ := keep.MemInfo()
	if free0-free1 < size {
		t.Fatalf("free memory fell by %d, want >= %d", free0-free1, size)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	free2, _, _ := keep.MemInfo()
	if free0-free2 > size/8 {
		t.Fatalf("after Close free memory is %d below the start, want the 1 GiB back", free0-free2)
	}
	if _, err := c.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc on a closed context: %v, want ErrClosed", err)
	}
}

// A held gate keeps the stream's later work waiting until Open: an event
// recorded behind it runs only after the host opens it (20 ms later here),
// and one recorded before it does not wait.
func TestGPUGateHoldsTheStream(t *testing.T) {
	c := gpu(t)
	g, err := c.NewGate()
	if err != nil {
		t.Fatalf("NewGate: %v", err)
	}
	s, _ := c.NewStream()
	e0, _ := c.NewEvent()
	e1, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second Hold waits for the next value
		if err := e0.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := g.Hold(s); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		if err := g.Hold(s); err == nil {
			t.Fatal("a second Hold before Open succeeded")
		}
		if err := e1.Record(s); err != nil {
			g.Open()
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		g.Open()
		if err := e1.Synchronize(); err != nil {
			t.Fatal(err)
		}
		ms, err := Elapsed(e0, e1)
		if err != nil || ms < 15 {
			t.Fatalf("round %d: %v ms between the events around the held gate (want >= 15: the stream waited), %v", round, ms, err)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
}
