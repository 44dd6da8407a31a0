package flashattn_test

import (
	"errors"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// The split rule needs no GPU: one CTA per SM (on a paged cache two where
// they fit and each split still streams 6 blocks), one split once B*Hkv
// fills the GPU, never splits shorter than 2 blocks or one of 128 keys (the
// cases are the H200 sweeps' best counts).
func TestDecodeSplitRule(t *testing.T) {
	for _, c := range []struct {
		ctas, sms, perSM, span, bc, want int
		paged                            bool
	}{
		{264, 132, 2, 131072, 64, 1, false},                            // B*Hkv = 264 fills an H200 twice over
		{500, 132, 2, 1 << 20, 64, 1, false},                           // more than full
		{8, 132, 2, 131072, 64, 16, false},                             // B=1, Hkv=8, a 128k cache: one CTA per SM
		{8, 132, 2, 65536, 64, 16, false},                              // 1024 blocks: one CTA per SM
		{8, 132, 2, 32768, 64, 16, false},                              // 512 blocks: one CTA per SM
		{32, 132, 2, 131072, 64, 4, false},                             // B=4: 128 CTAs, one per SM
		{32, 132, 2, 8192, 64, 4, false},                               // 128 blocks: one CTA per SM
		{8, 132, 2, 1024, 64, 8, false},                                // a 1k cache: 16 blocks, at least 2 per split
		{8, 132, 2, 1024, 128, 8, false},                               // D <= 64 (128-key blocks): one block per split
		{8, 132, 2, 2048, 128, 16, false},                              // 16 blocks of 128
		{8, 132, 2, 100, 64, 1, false},                                 // shorter than 2 blocks: one split
		{1, 132, 2, 131072, 64, 132, false},                            // MQA, B=1: one CTA per SM
		{1, 132, 2, 4096, 64, 32, false},                               // MQA at 4k: 64 blocks, 2 per split (on an H200 32 take 11.7 us, 16 14.9)
		{2, 132, 2, 3072, 64, 24, false},                               // 16/2 at 3k: 48 blocks
		{1, 132, 2, 8192, 64, 64, false},                               // MQA at 8k: 128 blocks
		{1, 1 << 20, 2, 1 << 30, 16, flashattn.MaxDecodeSplits, false}, // capped
		{8, 108, 1, 131072, 64, 13, false},                             // an A100: one 96 KiB CTA per SM
		{4, 40, 2, 32768, 64, 10, false},                               // a T4: 512 blocks, one 32 KiB CTA per SM (one covers a T4 SM's latency, traits.cuh)
		{200, 132, 2, 131072, 64, 1, false},                            // 200 CTAs: a second split would need 400
		{100, 132, 2, 131072, 64, 1, false},                            // 100 CTAs: one wave
		{8, 132, 2, 16384, 64, 33, true},                               // paged: two CTAs per SM from 6 blocks per split
		{8, 132, 2, 4096, 64, 16, true},                                // 64 blocks: one CTA per SM
	} {
		if got := flashattn.DecodeSplits(c.ctas, c.sms, c.perSM, c.span, c.bc, c.paged); got != c.want {
			t.Errorf("decodeSplits(ctas %d, SMs %d, %d per SM, span %d, Bc %d, paged %t) = %d, want %d", c.ctas, c.sms, c.perSM, c.span, c.bc, c.paged, got, c.want)
		}
	}
}

// The merge-share rule needs no GPU: enough CTAs that each merging thread
// loads one batch of splits, and few enough waiting CTAs over all groups.
func TestDecodeMergeCTAsRule(t *testing.T) {
	for _, c := range []struct {
		groups, splits, rows, d, threads, sms, want int
	}{
		{1, 132, 8, 128, 128, 132, 17}, // MQA 8/1 at 32k: 128 items x 132 splits over 128 threads x 8 loads
		{1, 32, 8, 128, 128, 132, 4},   // MQA at 4k
		{8, 16, 4, 128, 128, 132, 1},   // 32/8, 16 splits: 64 items x 16 fit one CTA's batch
		{8, 8, 4, 64, 128, 132, 1},     // D64
		{1, 1, 8, 128, 128, 132, 1},    // one split: no merge
		{1, 256, 16, 256, 64, 132, 34}, // D256 (2 warps): 512 items x 256 splits want 256, waiting CTAs cap 1+132/4
		{6, 40, 8, 128, 128, 132, 5},   // the sanitizer's shape: 3 x 2 groups of 40 splits
		{64, 4, 16, 128, 128, 132, 1},  // B*Hkv 64: the cap 1+132/256
		{2, 66, 8, 128, 128, 132, 9},   // 16/2 at 16k
		{16, 16, 16, 128, 128, 132, 3}, // 16 groups of 16 rows: the waiting-CTA cap 1+132/64 binds (4 wanted)
	} {
		if got := flashattn.DecodeMergeCTAs(c.groups, c.splits, c.rows, c.d, c.threads, c.sms); got != c.want {
			t.Errorf("decodeMergeCTAs(groups %d, splits %d, rows %d, D %d, %d threads, %d SMs) = %d, want %d",
				c.groups, c.splits, c.rows, c.d, c.threads, c.sms, got, c.want)
		}
	}
}

// PageMultiple is what the decode kernels' paged copies assume of a block
// size (decode.cuh reads one block-table entry per group of that many rows).
func TestPageMultipleMatchesKernels(t *testing.T) {
	src, err := os.ReadFile("../kernels/decode.cuh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`constexpr int kPageMultiple = (\d+);`).FindSubmatch(src)
	if m == nil || string(m[1]) != itoa(flashattn.PageMultiple) {
		t.Errorf("decode.cuh's kPageMultiple %q, flashattn.PageMultiple %d", m, flashattn.PageMultiple)
	}
	// The host sizes the merge's shares on the kernel's loads per batch.
	m = regexp.MustCompile(`constexpr int kMergeLoads = (\d+);`).FindSubmatch(src)
	if m == nil || string(m[1]) != itoa(flashattn.DecodeMergeLoads) {
		t.Errorf("decode.cuh's kMergeLoads %q, the host's %d", m, flashattn.DecodeMergeLoads)
	}
	// The host caps the splits however much room the GPU has.
	if s := flashattn.DecodeSplits(1, 1<<20, 2, 1<<30, 16, false); s != flashattn.MaxDecodeSplits {
		t.Errorf("decodeSplits with room for any number picks %d, want the cap %d", s, flashattn.MaxDecodeSplits)
	}
}

// TestGPUKVCacheConformance runs the suite's decode cases on both kernel
// paths (the sm_75 one from its PTX), each with the automatic split count,
// one split (the decode kernel writes O itself) and 3 and 7 splits (partial
// results merged by the last CTA of each group; with 7 some splits of the
// short sequences are empty), and 7 and 40 splits whose merge 3 and 5 CTAs
// share (the kernel caps the share count at the group's items). Outputs are NaN-poisoned before the launch, so
// attntest reports any element left unwritten; every call runs its kernel
// twice, poisoned again before the second, whose merge must run too (its
// split counters back at zero).
func TestGPUKVCacheConformance(t *testing.T) {
	dev := openGPU(t)
	for _, path := range []int{0, 75} {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		for _, sm := range [][2]int{{0, 0}, {1, 0}, {3, 0}, {7, 0}, {7, 3}, {40, 5}} {
			splits, merge := sm[0], sm[1]
			name := "path" + itoa(path) + "-splits" + itoa(splits)
			if merge > 0 {
				name += "-merge" + itoa(merge)
			}
			t.Run(name, func(t *testing.T) {
				defer flashattn.ForceDecodeSplits(flashattn.ForceDecodeSplits(splits))
				defer flashattn.ForceDecodeMergeCTAs(flashattn.ForceDecodeMergeCTAs(merge))
				defer flashattn.ForceDecodeRepeats(flashattn.ForceDecodeRepeats(2))
				b := attntest.Backend{Name: "gpu-decode-" + name, Precision: attntest.FP16, HeadDims: dev.SupportedHeadDims(flashattn.OpKVCache, flashattn.FP16, nil),
					ForwardKVCache: func(q, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
						res, err := dev.ForwardKVCacheHost(q, kc, vc, c, o)
						if err == nil && !strings.Contains(res.Reason, "fa2_decode_sm") {
							t.Errorf("%d splits ran %s", splits, res.Reason)
						}
						return res, err
					},
					ForwardKVCacheAppend: deviceAppend(dev, dev.Upload)}
				attntest.RunKVCache(t, b)
			})
		}
	}
	if err := dev.ForcePath(0); err != nil {
		t.Fatal(err)
	}
}

// TestGPUKVCacheDevice: decode steps on a cache that stays on the device
// give, bit for bit, what the host path gives, with and without the score
// modifiers.
func TestGPUKVCacheDevice(t *testing.T) {
	dev := openGPU(t)
	c := attntest.KVCases()[6] // decode-Nq2-gqa8-d64-paged48
	q, _, _, k, v, cache := c.Inputs()
	dq, err := dev.Upload(q)
	if err != nil {
		t.Fatal(err)
	}
	defer dq.Free()
	dk, err := dev.Upload(k)
	if err != nil {
		t.Fatal(err)
	}
	defer dk.Free()
	dv, err := dev.Upload(v)
	if err != nil {
		t.Fatal(err)
	}
	defer dv.Free()
	for step, lens := range [][]int{cache.SeqLens, {301, 2, 518, 1, 130}} {
		cache.SeqLens = lens
		want, err := dev.ForwardKVCacheHost(q, k, v, cache, c.Options())
		if err != nil {
			t.Fatal(err)
		}
		r, err := dev.ForwardKVCache(dq, dk, dv, cache, c.Options())
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Out.Download()
		if err != nil {
			t.Fatal(err)
		}
		lse, err := r.LSE()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Free(); err != nil {
			t.Fatal(err)
		}
		if !bitsEqual(out.Data, want.Out.Data) || !bitsEqual(lse, want.LSE) {
			t.Errorf("step %d: device decode differs from the host path", step)
		}
	}
	// The public entry point runs the same kernels through the default device.
	pub, err := flashattn.ForwardKVCache(q, k, v, cache, &flashattn.Options{Backend: flashattn.GPU, Causal: c.Causal})
	want, herr := dev.ForwardKVCacheHost(q, k, v, cache, c.Options())
	if err != nil || herr != nil || pub.Backend != flashattn.GPU || !strings.Contains(pub.Reason, "fa2_decode_") ||
		!bitsEqual(pub.Out.Data, want.Out.Data) || !bitsEqual(pub.LSE, want.LSE) {
		t.Errorf("ForwardKVCache with Backend GPU: %v, %v; %+v", err, herr, pub)
	}
	// The score modifiers run on the device too, as the host path runs them
	// (the suite checks their values: TestGPUKVCacheConformance).
	mods := &flashattn.Options{Window: &flashattn.Window{Left: 40, Right: 0}, Softcap: 20, ALiBi: attntest.ALiBiSlopes(c.Hq)}
	r, err := dev.ForwardKVCache(dq, dk, dv, cache, mods)
	want, herr = dev.ForwardKVCacheHost(q, k, v, cache, mods)
	if err != nil || herr != nil {
		t.Fatalf("window, softcap and ALiBi: device %v, host %v", err, herr)
	}
	out, derr := r.Out.Download()
	lse, lerr := r.LSE()
	if derr != nil || lerr != nil || r.Free() != nil || !bitsEqual(out.Data, want.Out.Data) || !bitsEqual(lse, want.LSE) {
		t.Errorf("window, softcap and ALiBi: device decode differs from the host path (%v, %v)", derr, lerr)
	}
	if _, err := dev.ForwardKVCache(dq, dk, dk, flashattn.KVCache{SeqLens: []int{1}}, nil); err == nil {
		t.Error("SeqLens of the wrong length: no error")
	}
}

// TestGPUKVCacheBF16: the bf16 decode kernels (sm_80 path), through the
// Device API, against the suite's bf16 baseline.
func TestGPUKVCacheBF16(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() < 80 {
		t.Skip("bf16 needs sm_80")
	}
	b := attntest.Backend{Name: "gpu-decode-bf16", Precision: attntest.BF16, HeadDims: dev.SupportedHeadDims(flashattn.OpKVCache, flashattn.BF16, nil),
		ForwardKVCache: func(q, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
			ts, free, err := uploadBF16(dev, q, kc, vc)
			if err != nil {
				return nil, err
			}
			defer free()
			r, err := dev.ForwardKVCache(ts[0], ts[1], ts[2], c, o)
			if err != nil {
				return nil, err
			}
			defer r.Free()
			out, err := r.Out.Download()
			if err != nil {
				return nil, err
			}
			lse, err := r.LSE()
			return &flashattn.Result{Dims: r.Dims, Out: out, LSE: lse, Backend: flashattn.GPU}, err
		},
		ForwardKVCacheAppend: deviceAppend(dev, dev.UploadBF16)}
	attntest.RunKVCache(t, b)
}

// TestGPUBenchKVCache: the decode benchmark times the decode call on a
// contiguous and a paged cache and counts the bytes it must read.
func TestGPUBenchKVCache(t *testing.T) {
	dev := openGPU(t)
	dims := flashattn.Dims{B: 2, Nq: 1, Nk: 4096, Hq: 8, Hkv: 2, D: 128}
	for _, page := range []int{0, 256} {
		r, err := dev.Bench(flashattn.OpKVCache, dims, flashattn.FP16, &flashattn.Options{Causal: true}, flashattn.BenchConfig{Warmup: 1, Reps: 3, PageSize: page})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(2 * 4096 * 2 * 128 * 2 * 2); r.KVBytes != want || r.Splits < 1 || r.TBps <= 0 || r.MedianMs <= 0 || r.PageSize != page {
			t.Errorf("page %d: %+v (want %d bytes)", page, r, want)
		}
		// TB/s is those bytes over the median time (1e12 bytes per second).
		if want := float64(2*4096*2*128*2*2) / (r.MedianMs * 1e-3) / 1e12; math.Abs(r.TBps-want) > 1e-9*want {
			t.Errorf("page %d: %.6g TB/s, want %.6g from %d bytes in %.6g ms", page, r.TBps, want, r.KVBytes, r.MedianMs)
		}
		t.Logf("page %d: %.1f us, %.2f TB/s, %d splits, kernels %d", page, 1e3*r.MedianMs, r.TBps, r.Splits, len(r.Kernels))
	}
	if _, err := dev.Bench(flashattn.OpKVCache, dims, flashattn.FP16, nil, flashattn.BenchConfig{Warmup: 1, Reps: 1, PageSize: 48}); err == nil {
		t.Error("a page size that does not divide Nk: no error")
	}
}

// deviceAppend is an attntest ForwardKVCacheAppend through
// Device.ForwardKVCacheAppend on tensors up uploads; the device's cache is
// copied back into kc and vc, for the suite to check what was written.
func deviceAppend(dev *flashattn.Device, up func(*flashattn.Tensor) (*flashattn.DeviceTensor, error)) func(q, kn, vn, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
	return func(q, kn, vn, kc, vc *flashattn.Tensor, c flashattn.KVCache, o *flashattn.Options) (*flashattn.Result, error) {
		var ts []*flashattn.DeviceTensor
		defer func() {
			for _, d := range ts {
				_ = d.Free()
			}
		}()
		for _, x := range []*flashattn.Tensor{q, kn, vn, kc, vc} {
			d, err := up(x)
			if err != nil {
				return nil, err
			}
			ts = append(ts, d)
		}
		r, err := dev.ForwardKVCacheAppend(ts[0], ts[1], ts[2], ts[3], ts[4], c, o)
		if err != nil {
			return nil, err
		}
		defer r.Free()
		for i, x := range []*flashattn.Tensor{kc, vc} {
			got, err := ts[3+i].Download()
			if err != nil {
				return nil, err
			}
			copy(x.Data, got.Data)
		}
		out, err := r.Out.Download()
		if err != nil {
			return nil, err
		}
		lse, err := r.LSE()
		return &flashattn.Result{Dims: r.Dims, Out: out, LSE: lse, Backend: flashattn.GPU}, err
	}
}

// TestGPUKVCacheAppendDevice: on the device, a full cache and a shared
// block are typed errors that leave the cache as it was, and a decode step
// with append costs little more than one without (logged: host-timed calls,
// B 1, 32/8 heads, D 128, a 32k cache).
func TestGPUKVCacheAppendDevice(t *testing.T) {
	dev := openGPU(t)
	q := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 4, D: 64}, 1)
	kn := flashattn.Random(flashattn.Shape{B: 2, N: 1, H: 2, D: 64}, 2)
	pk := flashattn.Random(flashattn.Shape{B: 4, N: 16, H: 2, D: 64}, 3)
	var ts []*flashattn.DeviceTensor
	defer func() {
		for _, d := range ts {
			_ = d.Free()
		}
	}()
	for _, x := range []*flashattn.Tensor{q, kn, kn, pk, pk} {
		d, err := dev.Upload(x)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, d)
	}
	before, err := ts[3].Download()
	if err != nil {
		t.Fatal(err)
	}
	var (
		full *flashattn.CacheFullError
		ro   *flashattn.ReadOnlyCacheError
	)
	_, err = dev.ForwardKVCacheAppend(ts[0], ts[1], ts[2], ts[3], ts[4], flashattn.KVCache{SeqLens: []int{16, 3}, BlockTable: [][]int{{0}, {1}}, BlockSize: 16}, nil)
	if !errors.As(err, &full) {
		t.Errorf("full: %v, want a *CacheFullError", err)
	}
	_, err = dev.ForwardKVCacheAppend(ts[0], ts[1], ts[2], ts[3], ts[4], flashattn.KVCache{SeqLens: []int{3, 20}, BlockTable: [][]int{{2}, {2, 3}}, BlockSize: 16}, nil)
	if !errors.As(err, &ro) {
		t.Errorf("shared block: %v, want a *ReadOnlyCacheError", err)
	}
	_, err = dev.ForwardKVCacheAppend(ts[0], ts[1], ts[2], ts[3], ts[3], flashattn.KVCache{SeqLens: []int{3, 4}, BlockTable: [][]int{{0}, {1}}, BlockSize: 16}, nil)
	if !errors.As(err, &ro) {
		t.Errorf("one buffer: %v, want a *ReadOnlyCacheError", err)
	}
	after, err := ts[3].Download()
	if err != nil {
		t.Fatal(err)
	}
	if !bitsEqual(before.Data, after.Data) {
		t.Error("a refused append wrote the cache")
	}

	// The cost of the copies: a 32k decode step with and without append.
	d := flashattn.Dims{B: 1, Nq: 1, Nk: 32768, Hq: 32, Hkv: 8, D: 128}
	var big []*flashattn.DeviceTensor
	defer func() {
		for _, x := range big {
			_ = x.Free()
		}
	}()
	for i, s := range []flashattn.Shape{d.QShape(), {B: 1, N: 1, H: 8, D: 128}, {B: 1, N: 1, H: 8, D: 128}, d.KVShape(), d.KVShape()} {
		x, err := dev.Upload(flashattn.Random(s, uint64(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		big = append(big, x)
	}
	c := flashattn.KVCache{SeqLens: []int{d.Nk - 1}}
	median := func(f func() error) time.Duration {
		var ds []time.Duration
		for i := 0; i < 25; i++ {
			t0 := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	plain := median(func() error {
		r, err := dev.ForwardKVCache(big[0], big[3], big[4], flashattn.KVCache{SeqLens: []int{d.Nk}}, nil)
		if err == nil {
			err = r.Free()
		}
		return err
	})
	appended := median(func() error {
		r, err := dev.ForwardKVCacheAppend(big[0], big[1], big[2], big[3], big[4], c, nil)
		if err == nil {
			err = r.Free()
		}
		return err
	})
	t.Logf("32k decode step, host-timed median of 25 (allocation, upload of SeqLens, kernels, wait, free): %v; with append of one token: %v", plain, appended)
}
