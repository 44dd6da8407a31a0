package flashattn_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// GPU reliability tests: fp16 range and scales on the device paths, two
// GPUs in one process, and a 131072-token problem. Each skips cleanly
// without the GPUs it needs.

// TestGPURefusesWhatFP16CannotHold: every GPU entry point refuses values
// fp16 cannot hold, naming the argument and element; Auto runs them on the
// CPU, which answers finitely, and says why.
func TestGPURefusesWhatFP16CannotHold(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 1, Nq: 16, Nk: 16, Hq: 2, Hkv: 1, D: 64}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	for _, x := range []float32{1e6, -7e4, float32(math.Inf(-1)), float32(math.NaN())} {
		bad := k.Clone()
		bad.Set(0, 5, 0, 9, x)
		var de *flashattn.DataError
		for name, call := range map[string]func() error{
			"Upload":      func() error { _, err := dev.Upload(bad); return err },
			"ForwardHost": func() error { _, err := dev.ForwardHost(q, bad, v, nil); return err },
			"BackwardHost": func() error {
				r, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.CPUFlash})
				if err != nil {
					return err
				}
				_, err = dev.BackwardHost(q, bad, v, r.Out, q, r.LSE, nil)
				return err
			},
			"Forward(GPU)": func() error {
				_, err := flashattn.Forward(q, bad, v, &flashattn.Options{Backend: flashattn.GPU})
				return err
			},
		} {
			if err := call(); !errors.As(err, &de) || !strings.Contains(err.Error(), "(0, 5, 0, 9)") {
				t.Errorf("%v, %s: %v, want a *DataError naming element (0, 5, 0, 9)", x, name, err)
			}
		}
		r, err := flashattn.Forward(q, bad, v, nil)
		if err != nil || r.Backend != flashattn.CPUFlash || !strings.Contains(r.Reason, "fp16") {
			t.Errorf("%v, Auto: %v, %v (%q), want the CPU and the reason", x, err, r.Backend, r.Reason)
		}
	}
	if _, err := dev.UploadBits(flashattn.Shape{B: 1, N: 1, H: 1, D: 4}, flashattn.FP16, []uint16{0, 0x7c00, 0, 0}); err == nil {
		t.Error("UploadFP16 took +Inf bits")
	}
	// A scale at which the kernels' float32 scores could overflow.
	var ue *flashattn.UnsupportedError
	if _, err := dev.ForwardHost(q, k, v, &flashattn.Options{Scale: 3.4e38}); !errors.As(err, &ue) || ue.Feature != "scale" {
		t.Errorf("scale 3.4e38 on the GPU: %v, want *UnsupportedError for the scale", err)
	}
	r, err := flashattn.Forward(q, k, v, &flashattn.Options{Scale: 3.4e38})
	if err != nil || r.Backend != flashattn.CPUFlash || !strings.Contains(r.Reason, "scale") {
		t.Errorf("scale 3.4e38, Auto: %v, %v (%q)", err, r.Backend, r.Reason)
	}
}

// openDevices opens GPUs 0..n-1, or skips without n of them.
func openDevices(t *testing.T, n int) []*flashattn.Device {
	t.Helper()
	infos, err := flashattn.Devices()
	if errors.Is(err, flashattn.ErrNoGPU) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < n {
		t.Skipf("%d GPU(s), the test needs %d", len(infos), n)
	}
	devs := make([]*flashattn.Device, n)
	for i := range devs {
		if devs[i], err = flashattn.OpenDevice(i); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = devs[i].Close() })
	}
	return devs
}

// freeOn is the free memory of GPU i (cuMemGetInfo).
func freeOn(t *testing.T, i int) uint64 {
	t.Helper()
	infos, err := flashattn.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return infos[i].FreeMem
}

// twoGPUProblem is the problem the two-GPU tests run: GQA, causal, Nq != Nk.
var twoGPUProblem = flashattn.Dims{B: 2, Nq: 300, Nk: 260, Hq: 8, Hkv: 2, D: 64}

// callResult is the bits of one forward and backward call.
type callResult []uint32

func bitsOf(xs ...[]float32) callResult {
	var out callResult
	for _, x := range slices.Concat(xs...) {
		out = append(out, math.Float32bits(x))
	}
	return out
}

// hostCall runs the forward and backward of the problem on dev through the
// host paths and returns their bits.
func hostCall(dev *flashattn.Device, q, k, v, dO *flashattn.Tensor) (callResult, error) {
	o := &flashattn.Options{Causal: true}
	r, err := dev.ForwardHost(q, k, v, o)
	if err != nil {
		return nil, err
	}
	g, err := dev.BackwardHost(q, k, v, r.Out, dO, r.LSE, o)
	if err != nil {
		return nil, err
	}
	return bitsOf(r.Out.Data, r.LSE, g.DQ.Data, g.DK.Data, g.DV.Data), nil
}

// TestGPUTwoDevices: GPUs 0 and 1 open in one process; many goroutines
// call both at once; every result is bitwise the result of one GPU alone;
// Options.Device routes Forward and Backward; device memory is flat over
// 10,000 calls on each; closing one GPU leaves the other working.
func TestGPUTwoDevices(t *testing.T) {
	devs := openDevices(t, 2)
	d := twoGPUProblem
	q, k, v, dO := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3), flashattn.Random(d.QShape(), 4)
	// Single-GPU results, one device at a time.
	var single [2]callResult
	for i, dev := range devs {
		r, err := hostCall(dev, q, k, v, dO)
		if err != nil {
			t.Fatal(err)
		}
		single[i] = r
		t.Logf("%s", dev.Info())
	}
	sameArch := devs[0].Info().Arch() == devs[1].Info().Arch()
	if sameArch && !slices.Equal(single[0], single[1]) {
		t.Error("GPU 0 and GPU 1 (same arch) give different bits")
	}

	// Options.Device routes the package-level calls.
	for i := range devs {
		o := &flashattn.Options{Backend: flashattn.GPU, Device: i, Causal: true}
		r, err := flashattn.Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		g, err := flashattn.Backward(q, k, v, r.Out, dO, r.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("GPU %d: ", i)
		if !strings.HasPrefix(r.Reason, want) || !strings.HasPrefix(g.Reason, want) {
			t.Errorf("Device %d: forward ran on %q, backward on %q", i, r.Reason, g.Reason)
		}
		if got := bitsOf(r.Out.Data, r.LSE, g.DQ.Data, g.DK.Data, g.DV.Data); !slices.Equal(got, single[i]) {
			t.Errorf("Device %d through Forward/Backward differs from the device's own run", i)
		}
	}
	if _, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.GPU, Device: 99}); !errors.Is(err, flashattn.ErrNoGPU) {
		t.Errorf("Device 99: %v, want ErrNoGPU", err)
	}

	// Device memory over 10,000 calls on each GPU, both at once.
	dq := make([][3]*flashattn.DeviceTensor, 2) // q, k, v on each GPU
	for i, dev := range devs {
		for j, x := range []*flashattn.Tensor{q, k, v} {
			up, err := dev.Upload(x)
			if err != nil {
				t.Fatal(err)
			}
			dq[i][j] = up
		}
	}
	const calls, workers = 10000, 8
	var before, after [2]uint64
	warm := func(i int) error { // load every kernel and the driver's own buffers first
		for range 10 {
			r, err := devs[i].Forward(dq[i][0], dq[i][1], dq[i][2], &flashattn.Options{Causal: true})
			if err != nil {
				return err
			}
			if err := r.Free(); err != nil {
				return err
			}
			if _, err := hostCall(devs[i], q, k, v, dO); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range devs {
		if err := warm(i); err != nil {
			t.Fatal(err)
		}
	}
	// hammer makes n device calls on each GPU from 8 goroutines per GPU,
	// every 100th also through the host paths, checked bitwise.
	hammer := func(n int) {
		errs := make(chan error, 2*workers)
		var wg sync.WaitGroup
		for i := range devs {
			for w := range workers {
				wg.Go(func() {
					for c := w; c < n; c += workers {
						r, err := devs[i].Forward(dq[i][0], dq[i][1], dq[i][2], &flashattn.Options{Causal: true})
						if err == nil {
							err = r.Free()
						}
						if err == nil && c%100 == 0 {
							var got callResult
							if got, err = hostCall(devs[i], q, k, v, dO); err == nil && !slices.Equal(got, single[i]) {
								err = fmt.Errorf("GPU %d, call %d: bits differ from the single-GPU run", i, c)
							}
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	hammer(1000) // the driver's own buffers for concurrent use, first
	for i := range devs {
		before[i] = freeOn(t, i)
	}
	t0 := time.Now()
	hammer(calls)
	for i := range devs {
		after[i] = freeOn(t, i)
		t.Logf("GPU %d: cuMemGetInfo free %d bytes before, %d after %d calls (%d host-path calls) in %v; change %+d",
			i, before[i], after[i], calls, calls/100, time.Since(t0).Round(time.Millisecond), int64(after[i])-int64(before[i]))
		if before[i] > after[i]+2<<20 { // one leaked buffer per call would be >= 5 MB
			t.Errorf("GPU %d: %d bytes of device memory gone after %d calls", i, before[i]-after[i], calls)
		}
	}

	// Close GPU 0 while GPU 1 works; then open it again.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				if n == 0 {
					done <- errors.New("GPU 1 ran no call")
					return
				}
				done <- nil
				return
			default:
			}
			got, err := hostCall(devs[1], q, k, v, dO)
			if err == nil && !slices.Equal(got, single[1]) {
				err = errors.New("GPU 1 differs while GPU 0 closes")
			}
			if err != nil {
				done <- err
				return
			}
			n++
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := devs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := devs[0].Forward(dq[0][0], dq[0][1], dq[0][2], nil); !errors.Is(err, flashattn.ErrDeviceClosed) && !errors.Is(err, flashattn.ErrFreed) {
		t.Errorf("Forward on closed GPU 0: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	again, err := flashattn.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := hostCall(again, q, k, v, dO); err != nil || !slices.Equal(got, single[0]) {
		t.Errorf("GPU 0 reopened: %v (bits equal: %t)", err, slices.Equal(got, single[0]))
	}
}

// TestGPULongSequence: N = 131072 (B 1, Hq 4, Hkv 2, D 64, causal) forward
// and backward on one GPU. The device memory a call keeps beyond its inputs
// and outputs is the LSE (forward) and nothing (backward: Di is freed), B*H*N
// floats: no N x N buffer (that would be 32 GiB per head in fp16). Sampled
// rows of O, the LSE and dQ, and sampled keys of dK and dV, are checked
// against float64 sums on the fp16-rounded inputs.
func TestGPULongSequence(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 1, Nq: 131072, Nk: 131072, Hq: 4, Hkv: 2, D: 64}
	if need := uint64(2 * 3 * (d.QShape().Numel() + 2*d.KVShape().Numel())); dev.Info().TotalMem < 2*need {
		t.Skipf("%s has %d MiB; the test needs about %d", dev.Info(), dev.Info().TotalMem>>20, 2*need>>20)
	}
	round := func(x *flashattn.Tensor) *flashattn.Tensor {
		for i, v := range x.Data {
			x.Data[i] = attntest.RoundHalf(v)
		}
		return x
	}
	q, k, v := round(flashattn.Random(d.QShape(), 1)), round(flashattn.Random(d.KVShape(), 2)), round(flashattn.Random(d.KVShape(), 3))
	dO := round(flashattn.Random(d.QShape(), 4))
	var in [4]*flashattn.DeviceTensor
	for i, x := range []*flashattn.Tensor{q, k, v, dO} {
		var err error
		if in[i], err = dev.Upload(x); err != nil {
			t.Fatal(err)
		}
		defer in[i].Free()
	}
	o := &flashattn.Options{Causal: true}
	// Load the kernels (and the driver's memory for them) first.
	small := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 4, Hkv: 2, D: 64}
	sq, sk := flashattn.Random(small.QShape(), 5), flashattn.Random(small.KVShape(), 6)
	sr, err := dev.ForwardHost(sq, sk, sk, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.BackwardHost(sq, sk, sk, sr.Out, sq, sr.LSE, o); err != nil {
		t.Fatal(err)
	}
	ord := dev.Info().Ordinal
	free0 := freeOn(t, ord)
	t0 := time.Now()
	r, err := dev.Forward(in[0], in[1], in[2], o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	fwdTime := time.Since(t0)
	free1 := freeOn(t, ord)
	outBytes := uint64(2 * d.QShape().Numel())
	lseBytes := uint64(4 * d.LSELen())
	t1 := time.Now()
	g, err := dev.Backward(in[0], in[1], in[2], r, in[3], o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free()
	bwdTime := time.Since(t1)
	free2 := freeOn(t, ord)
	gradBytes := uint64(2 * (d.QShape().Numel() + 2*d.KVShape().Numel()))
	t.Logf("N=%d: forward %v, backward %v (wall time of the device calls, inputs already uploaded); device memory: forward kept %d bytes (O %d + LSE %d), backward %d (dQ, dK, dV %d)",
		d.Nq, fwdTime.Round(time.Millisecond), bwdTime.Round(time.Millisecond), int64(free0)-int64(free1), outBytes, lseBytes, int64(free1)-int64(free2), gradBytes)
	const slack = 4 << 20 // the driver's allocation granularity
	if fx, bx := int64(free0)-int64(free1)-int64(outBytes+lseBytes), int64(free1)-int64(free2)-int64(gradBytes); fx > slack || bx > slack {
		t.Errorf("device memory beyond inputs and outputs: forward %d, backward %d bytes", fx, bx)
	}

	out, err := r.Out.Download()
	if err != nil {
		t.Fatal(err)
	}
	lse, err := r.LSE()
	if err != nil {
		t.Fatal(err)
	}
	dq, err := g.DQ.Download()
	if err != nil {
		t.Fatal(err)
	}
	dk, err := g.DK.Download()
	if err != nil {
		t.Fatal(err)
	}
	dv, err := g.DV.Download()
	if err != nil {
		t.Fatal(err)
	}
	scale := 1 / math.Sqrt(float64(d.D))
	score := func(h, i, j int) float64 {
		s := 0.0
		for x := 0; x < d.D; x++ {
			s += float64(q.At(0, i, h, x)) * float64(k.At(0, j, d.KVHead(h), x))
		}
		return s * scale
	}
	dot := func(a, b *flashattn.Tensor, i, ha, j, hb int) float64 {
		s := 0.0
		for x := 0; x < d.D; x++ {
			s += float64(a.At(0, i, ha, x)) * float64(b.At(0, j, hb, x))
		}
		return s
	}
	check := func(what string, got float32, want, scaleOf float64) {
		if e := math.Abs(float64(got) - want); !(e <= 1e-2*scaleOf+1e-4) {
			t.Errorf("%s = %v, want %.6g (error %.3g, row scale %.3g)", what, got, want, e, scaleOf)
		}
	}
	rows := []int{0, 1, 4095, 65536, 131071}
	for _, h := range []int{0, 3} {
		kh := d.KVHead(h)
		for _, i := range rows {
			// Forward: O and LSE of row i (keys 0..i).
			m := math.Inf(-1)
			for j := 0; j <= i; j++ {
				m = max(m, score(h, i, j))
			}
			l, o := 0.0, make([]float64, d.D)
			for j := 0; j <= i; j++ {
				p := math.Exp(score(h, i, j) - m)
				l += p
				for x := range o {
					o[x] += p * float64(v.At(0, j, kh, x))
				}
			}
			L := m + math.Log(l)
			check(fmt.Sprintf("LSE[h=%d i=%d]", h, i), lse[d.LSEIndex(0, h, i)], L, math.Abs(L))
			omax := 0.0
			for x := range o {
				o[x] /= l
				omax = max(omax, math.Abs(o[x]))
			}
			di := 0.0
			for x := range o {
				check(fmt.Sprintf("O[h=%d i=%d x=%d]", h, i, x), out.At(0, i, h, x), o[x], omax)
				di += float64(dO.At(0, i, h, x)) * float64(out.At(0, i, h, x))
			}
			// dQ_i = scale * sum_j P_ij (dO_i . v_j - Di) k_j.
			dqi := make([]float64, d.D)
			for j := 0; j <= i; j++ {
				ds := math.Exp(score(h, i, j)-L) * (dot(dO, v, i, h, j, kh) - di)
				for x := range dqi {
					dqi[x] += scale * ds * float64(k.At(0, j, kh, x))
				}
			}
			qmax := 0.0
			for _, x := range dqi {
				qmax = max(qmax, math.Abs(x))
			}
			for x := range dqi {
				check(fmt.Sprintf("dQ[h=%d i=%d x=%d]", h, i, x), dq.At(0, i, h, x), dqi[x], qmax)
			}
		}
	}
	// dK_j and dV_j of kv head 0 sum over its query heads 0 and 1 and the
	// rows i >= j, with P from the GPU's LSE (checked above where sampled).
	for _, j := range []int{0, 65536, 131071} {
		dkj, dvj := make([]float64, d.D), make([]float64, d.D)
		for h := 0; h < d.Groups(); h++ {
			for i := j; i < d.Nq; i++ {
				p := math.Exp(score(h, i, j) - float64(lse[d.LSEIndex(0, h, i)]))
				di := dot(dO, out, i, h, i, h)
				ds := p * (dot(dO, v, i, h, j, 0) - di)
				for x := 0; x < d.D; x++ {
					dvj[x] += p * float64(dO.At(0, i, h, x))
					dkj[x] += scale * ds * float64(q.At(0, i, h, x))
				}
			}
		}
		kmax, vmax := 0.0, 0.0
		for x := range dkj {
			kmax, vmax = max(kmax, math.Abs(dkj[x])), max(vmax, math.Abs(dvj[x]))
		}
		for x := range dkj {
			check(fmt.Sprintf("dK[j=%d x=%d]", j, x), dk.At(0, j, 0, x), dkj[x], kmax)
			check(fmt.Sprintf("dV[j=%d x=%d]", j, x), dv.At(0, j, 0, x), dvj[x], vmax)
		}
	}
}
