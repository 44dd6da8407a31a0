package flashattn_test

import (
	"fmt"

	"github.com/goflash/goflash/flashattn"
)

// A causal sliding window of one key back: row i sees keys i-1 and i only.
// Backend CPUFlash pins the CPU, so the output is the same with or without
// a GPU.
func ExampleForward_slidingWindow() {
	q := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	k := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	v := tiny([2]float32{1, 2}, [2]float32{3, 4}, [2]float32{5, 6})
	o := &flashattn.Options{Causal: true, Window: &flashattn.Window{Left: 1, Right: -1}, Scale: 1, Backend: flashattn.CPUFlash}
	res, err := flashattn.Forward(q, k, v, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("out[%d] = %.4f  lse = %.4f\n", i, res.Out.Row(0, i, 0), res.LSE[i])
	}
	// Output:
	// out[0] = [1.0000 2.0000]  lse = 1.0000
	// out[1] = [2.4621 3.4621]  lse = 1.3133
	// out[2] = [4.4621 5.4621]  lse = 2.3133
}

// Two sequences packed without padding, of 1 and 2 tokens: each attends only
// to its own keys, with its own causal diagonal. The LSE is (Hq, total_q).
func ExampleForwardVarlen() {
	q := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	k := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	v := tiny([2]float32{1, 2}, [2]float32{3, 4}, [2]float32{5, 6})
	vl := flashattn.Varlen{CuSeqlensQ: []int{0, 1, 3}, CuSeqlensK: []int{0, 1, 3}}
	res, err := flashattn.ForwardVarlen(q, k, v, vl, &flashattn.Options{Causal: true, Scale: 1, Backend: flashattn.CPUFlash})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("out[%d] = %.4f  lse = %.4f\n", i, res.Out.Row(0, i, 0), res.LSE[i])
	}
	// Output:
	// out[0] = [1.0000 2.0000]  lse = 1.0000
	// out[1] = [3.0000 4.0000]  lse = 1.0000
	// out[2] = [4.4621 5.4621]  lse = 2.3133
}

// Decoding one new token against a paged cache of 3 entries: blocks of 16
// entries, the sequence's first block being block 1 of the pool.
func ExampleForwardKVCache() {
	pool := flashattn.Shape{B: 2, N: 16, H: 1, D: 2} // 2 blocks of 16 entries
	kc, vc := flashattn.New(pool), flashattn.New(pool)
	for n, kv := range [][4]float32{{1, 0, 1, 2}, {0, 1, 3, 4}, {1, 1, 5, 6}} {
		kc.Set(1, n, 0, 0, kv[0])
		kc.Set(1, n, 0, 1, kv[1])
		vc.Set(1, n, 0, 0, kv[2])
		vc.Set(1, n, 0, 1, kv[3])
	}
	q := tiny([2]float32{1, 1})
	c := flashattn.KVCache{SeqLens: []int{3}, BlockTable: [][]int{{1}}, BlockSize: 16}
	res, err := flashattn.ForwardKVCache(q, kc, vc, c, &flashattn.Options{Scale: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("out = %.4f  lse = %.4f  on %v\n", res.Out.Row(0, 0, 0), res.LSE[0], res.Backend)
	// Output:
	// out = [3.7284 4.7284]  lse = 2.5514  on cpu-flash
}

// The same step as ExampleForwardKVCache, with the third entry appended by
// the call (as flash_attn_with_kvcache's k, v) instead of written before it.
func ExampleForwardKVCacheAppend() {
	pool := flashattn.Shape{B: 2, N: 16, H: 1, D: 2}
	kc, vc := flashattn.New(pool), flashattn.New(pool)
	for n, kv := range [][4]float32{{1, 0, 1, 2}, {0, 1, 3, 4}} {
		kc.Set(1, n, 0, 0, kv[0])
		kc.Set(1, n, 0, 1, kv[1])
		vc.Set(1, n, 0, 0, kv[2])
		vc.Set(1, n, 0, 1, kv[3])
	}
	q, kNew, vNew := tiny([2]float32{1, 1}), tiny([2]float32{1, 1}), tiny([2]float32{5, 6})
	c := flashattn.KVCache{SeqLens: []int{2}, BlockTable: [][]int{{1}}, BlockSize: 16}
	res, err := flashattn.ForwardKVCacheAppend(q, kNew, vNew, kc, vc, c, &flashattn.Options{Scale: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.SeqLens[0] += kNew.Shape.N // the caller keeps the lengths
	fmt.Printf("out = %.4f  lse = %.4f  v[2] = %v  SeqLens %v\n", res.Out.Row(0, 0, 0), res.LSE[0], vc.Row(1, 2, 0), c.SeqLens)
	// Output:
	// out = [3.7284 4.7284]  lse = 2.5514  v[2] = [5 6]  SeqLens [3]
}
