package flashattn

import (
	"errors"
	"testing"
)

// TestGPUKVCacheAppendOOMRestores: ForwardKVCacheAppend on the GPU writes
// the host cache before its upload; with the device's memory full the
// upload fails (ErrOutOfMemory) and the cache is as it was. Once the memory
// is free again the same call runs and keeps the new entries.
func TestGPUKVCacheAppendOOMRestores(t *testing.T) {
	dev, err := openDefault(0)
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	q := Random(Shape{B: 2, N: 1, H: 4, D: 64}, 1)
	kNew, vNew := Random(Shape{B: 2, N: 1, H: 2, D: 64}, 2), Random(Shape{B: 2, N: 1, H: 2, D: 64}, 3)
	kc, vc := Random(Shape{B: 2, N: 4096, H: 2, D: 64}, 4), Random(Shape{B: 2, N: 4096, H: 2, D: 64}, 5)
	c := KVCache{SeqLens: []int{100, 200}}
	o := &Options{Backend: GPU}
	if _, err := ForwardKVCache(q, kc, vc, c, o); err != nil { // loads the decode kernel
		t.Fatal(err)
	}
	// Fill the device's memory, in halving chunks down to 2 KiB.
	if err := dev.lock(); err != nil {
		t.Fatal(err)
	}
	var hog []*DeviceTensor
	for n := 1 << 30; n >= 1<<10; {
		x, err := dev.alloc(Shape{B: 1, N: n, H: 1, D: 1})
		if err != nil {
			n /= 2
			continue
		}
		hog = append(hog, x)
	}
	dev.mu.Unlock()
	free := func() {
		for _, x := range hog {
			if err := x.Free(); err != nil {
				t.Error(err)
			}
		}
		hog = nil
	}
	defer free()
	t.Logf("holding %d device buffers", len(hog))
	before := [][]float32{append([]float32(nil), kc.Data...), append([]float32(nil), vc.Data...)}
	_, err = ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o)
	t.Logf("with the device full: %v", err)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("with the device full: %v, want an error wrapping ErrOutOfMemory", err)
	}
	if !sameBits(before[0], kc.Data) || !sameBits(before[1], vc.Data) {
		t.Errorf("the failed call left the host cache written")
	}
	free()
	res, err := ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, o)
	if err != nil || res.Backend != GPU {
		t.Fatalf("with the memory free again: %v", err)
	}
	if kc.At(1, 200, 1, 63) != kNew.At(1, 0, 1, 63) || vc.At(0, 100, 0, 0) != vNew.At(0, 0, 0, 0) {
		t.Errorf("the call that ran lost the new entries")
	}
}
