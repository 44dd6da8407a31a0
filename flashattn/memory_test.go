package flashattn_test

import (
	"runtime"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// extraBytes is what one call allocates beyond its outputs (whose sizes come
// from Dims and are the same for every backend).
func extraBytes(t *testing.T, be flashattn.Backend, n int, backward bool) uint64 {
	t.Helper()
	d := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 1, Hkv: 1, D: 64}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	o := &flashattn.Options{Backend: be, Workers: 2}
	var res *flashattn.Result
	var err error
	if backward {
		if res, err = flashattn.Forward(q, k, v, o); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	outputs := 4 * (d.QShape().Numel() + d.LSELen()) // Out and LSE
	if backward {
		_, err = flashattn.Backward(q, k, v, res.Out, res.Out, res.LSE, o)
		outputs = 4 * (d.QShape().Numel() + 2*d.KVShape().Numel()) // dQ, dK, dV
	} else {
		_, err = flashattn.Forward(q, k, v, o)
	}
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return after.TotalAlloc - before.TotalAlloc - uint64(outputs)
}

// TestMemoryFlashLinear measures the bytes a forward call allocates beyond
// its outputs (runtime.MemStats.TotalAlloc), B=1, H=1, D=64: the naive path
// materialises S and P (2 * 4 * N^2 bytes), the flash path only per-worker
// tiles, so its extra memory does not grow with N^2.
func TestMemoryFlashLinear(t *testing.T) {
	naive1k, naive4k := extraBytes(t, flashattn.CPUNaive, 1024, false), extraBytes(t, flashattn.CPUNaive, 4096, false)
	flash1k, flash4k := extraBytes(t, flashattn.CPUFlash, 1024, false), extraBytes(t, flashattn.CPUFlash, 4096, false)
	t.Logf("forward extra bytes: naive N=1024 %d, N=4096 %d (x%.1f); flash N=1024 %d, N=4096 %d (x%.1f); flash/naive at 4096: %.5f",
		naive1k, naive4k, float64(naive4k)/float64(naive1k), flash1k, flash4k, float64(flash4k)/float64(flash1k), float64(flash4k)/float64(naive4k))
	if flash4k*8 >= naive4k {
		t.Errorf("flash extra bytes at N=4096 (%d) are not under 1/8 of naive's (%d)", flash4k, naive4k)
	}
	// 4x the length: linear growth is 4x, quadratic 16x. The naive path
	// shows the test can tell them apart.
	if naive4k < 12*naive1k {
		t.Errorf("naive grew only x%.1f from N=1024 to 4096; expected ~16 (is the measurement broken?)", float64(naive4k)/float64(naive1k))
	}
	if flash4k > 4*flash1k+64<<10 {
		t.Errorf("flash extra bytes grew from %d to %d for 4x the length: more than linear", flash1k, flash4k)
	}
}

// TestMemoryFlashBackwardLinear does the same for the backward pass (naive
// materialises P, dP and dS), at N=512 and 2048.
func TestMemoryFlashBackwardLinear(t *testing.T) {
	naiveS, naiveL := extraBytes(t, flashattn.CPUNaive, 512, true), extraBytes(t, flashattn.CPUNaive, 2048, true)
	flashS, flashL := extraBytes(t, flashattn.CPUFlash, 512, true), extraBytes(t, flashattn.CPUFlash, 2048, true)
	t.Logf("backward extra bytes: naive N=512 %d, N=2048 %d (x%.1f); flash N=512 %d, N=2048 %d (x%.1f)",
		naiveS, naiveL, float64(naiveL)/float64(naiveS), flashS, flashL, float64(flashL)/float64(flashS))
	if flashL*8 >= naiveL || naiveL < 12*naiveS || flashL > 4*flashS+64<<10 {
		t.Errorf("backward: flash must stay under 1/8 of naive and grow at most linearly (naive quadratically)")
	}
}
