package flashattn_test

import (
	"fmt"
	"math"
	"strings"

	"github.com/goflash/goflash/flashattn"
)

// tiny returns a (1, n, 1, 2) tensor holding rows.
func tiny(rows ...[2]float32) *flashattn.Tensor {
	data := make([]float32, 0, 2*len(rows))
	for _, r := range rows {
		data = append(data, r[0], r[1])
	}
	t, err := flashattn.FromSlice(flashattn.Shape{B: 1, N: len(rows), H: 1, D: 2}, data)
	if err != nil {
		panic(err)
	}
	return t
}

// Causal attention over three tokens, scale 1: row i averages v_0..v_i,
// weighted by softmax(q_i . k_j).
func ExampleForward() {
	q := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	k := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	v := tiny([2]float32{1, 2}, [2]float32{3, 4}, [2]float32{5, 6})
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, Scale: 1, Backend: flashattn.CPUFlash})
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
	// out[2] = [3.7284 4.7284]  lse = 2.5514
}

// With Nq > Nk the causal mask is aligned to the bottom-right corner: the
// last query row sees every key, the first Nq-Nk rows see none and get
// output 0 and LSE -Inf.
func ExampleForward_bottomRightCausal() {
	q := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	k := tiny([2]float32{1, 0}, [2]float32{0, 1})
	v := tiny([2]float32{1, 2}, [2]float32{3, 4})
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, Scale: 1, Backend: flashattn.CPUFlash})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("out[%d] = %.4f  lse = %.4f\n", i, res.Out.Row(0, i, 0), res.LSE[i])
	}
	// Output:
	// out[0] = [0.0000 0.0000]  lse = -Inf
	// out[1] = [1.0000 2.0000]  lse = 0.0000
	// out[2] = [2.0000 3.0000]  lse = 1.6931
}

// Gradients of sum(out) (dOut all ones) for the problem of ExampleForward.
// Backward recomputes P from the forward pass's LSE. By hand: dP_ij = sum(v_j)
// = 3, 7, 11 and D_i = sum(out_i), so row 0 (one key, P = 1) has dS = 0 and
// dq[0] = 0, while dv_j = sum_i P_ij.
func ExampleBackward() {
	q := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	k := tiny([2]float32{1, 0}, [2]float32{0, 1}, [2]float32{1, 1})
	v := tiny([2]float32{1, 2}, [2]float32{3, 4}, [2]float32{5, 6})
	o := &flashattn.Options{Causal: true, Scale: 1, Backend: flashattn.CPUFlash}
	res, err := flashattn.Forward(q, k, v, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	dOut := tiny([2]float32{1, 1}, [2]float32{1, 1}, [2]float32{1, 1})
	g, err := flashattn.Backward(q, k, v, res.Out, dOut, res.LSE, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("dq[%d] = %.4f  dk[%d] = %.4f  dv[%d] = %.4f\n",
			i, g.DQ.Row(0, i, 0), i, g.DK.Row(0, i, 0), i, g.DV.Row(0, i, 0))
	}
	// Output:
	// dq[0] = [0.0000 0.0000]  dk[0] = [-1.1565 -1.9429]  dv[0] = [1.4809 1.4809]
	// dq[1] = [-0.7864 0.7864]  dk[1] = [-0.3087 0.4777]  dv[1] = [0.9430 0.9430]
	// dq[2] = [0.3087 1.1565]  dk[2] = [1.4652 1.4652]  dv[2] = [0.5761 0.5761]
}

// A trace shows FA2's tiling of a causal problem: tiles on the diagonal are
// masked element by element, tiles above it are never loaded. The traced
// row's running max m and sum l end where its LSE says: LSE = m + log(l).
func ExampleTrace() {
	d := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 1, Hkv: 1, D: 32}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	tr := &flashattn.Trace{Row: 200}
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, BlockQ: 64, BlockK: 64, Trace: tr})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("Br=%d Bc=%d Tr=%d Tc=%d\n", tr.Br, tr.Bc, tr.Tr, tr.Tc)
	for i := 0; i < tr.Tr; i++ {
		var row []string
		for j := 0; j < tr.Tc; j++ {
			kind, _ := tr.Kind(i, j)
			row = append(row, fmt.Sprintf("%-8v", kind))
		}
		fmt.Println(strings.TrimSpace(strings.Join(row, " ")))
	}
	increasing := true
	for s := 1; s < len(tr.RowSteps); s++ {
		increasing = increasing && tr.RowSteps[s].M >= tr.RowSteps[s-1].M
	}
	lse := float64(res.LSE[d.LSEIndex(0, 0, 200)])
	fmt.Printf("row 200: %d K blocks, m never decreases: %v, |m + log(l) - LSE| < 1e-5: %v\n",
		len(tr.RowSteps), increasing, math.Abs(tr.M+math.Log(tr.L)-lse) < 1e-5)
	// Output:
	// Br=64 Bc=64 Tr=4 Tc=4
	// masked   skipped  skipped  skipped
	// computed masked   skipped  skipped
	// computed computed masked   skipped
	// computed computed computed masked
	// row 200: 4 K blocks, m never decreases: true, |m + log(l) - LSE| < 1e-5: true
}
