package flashattn_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// lseOf gathers the LSE of rows [r0, r0+n) of a packed (1, Hq, total) LSE.
func lseOf(lse []float32, hq, total, r0, n int) []float32 {
	var s []float32
	for h := 0; h < hq; h++ {
		s = append(s, lse[h*total+r0:][:n]...)
	}
	return s
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// cpuBackends runs f with options o for each CPU backend, the flash one
// with small tiles (several blocks per sequence, ragged ones).
func cpuBackends(t *testing.T, name string, o *flashattn.Options, f func(t *testing.T, o *flashattn.Options)) {
	for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		c := *o
		c.Backend = be
		if be == flashattn.CPUFlash {
			c.BlockQ, c.BlockK = 16, 8
		}
		t.Run(fmt.Sprintf("%s/%v", name, be), func(t *testing.T) { f(t, &c) })
	}
}

// TestVarlenAlone: on the CPU, ForwardVarlen and BackwardVarlen give each
// sequence of the suite's varlen cases, bit for bit, what Forward and
// Backward give it alone (attntest checks both against the truth, and the
// sequences without queries or keys).
func TestVarlenAlone(t *testing.T) {
	for _, c := range attntest.VarlenCases() {
		cpuBackends(t, c.Name, c.Options(), func(t *testing.T, o *flashattn.Options) {
			q, k, v, dO := c.Inputs()
			vl := c.Varlen()
			res, err := flashattn.ForwardVarlen(q, k, v, vl, o)
			if err != nil {
				t.Fatal(err)
			}
			g, err := flashattn.BackwardVarlen(q, k, v, res.Out, dO, res.LSE, vl, o)
			if err != nil {
				t.Fatal(err)
			}
			for s := 0; s < vl.Seqs(); s++ {
				r0, nq, k0, nk := vl.CuSeqlensQ[s], c.LensQ[s], vl.CuSeqlensK[s], c.LensK[s]
				if nq == 0 || nk == 0 {
					continue
				}
				qs, ks, vs, dOs := attntest.Rows(q, 0, r0, nq), attntest.Rows(k, 0, k0, nk), attntest.Rows(v, 0, k0, nk), attntest.Rows(dO, 0, r0, nq)
				alone, err := flashattn.Forward(qs, ks, vs, o)
				if err != nil {
					t.Fatal(err)
				}
				ga, err := flashattn.Backward(qs, ks, vs, alone.Out, dOs, alone.LSE, o)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range []struct {
					what      string
					got, want []float32
				}{{"Out", attntest.Rows(res.Out, 0, r0, nq).Data, alone.Out.Data}, {"LSE", lseOf(res.LSE, c.Hq, q.Shape.N, r0, nq), alone.LSE},
					{"dQ", attntest.Rows(g.DQ, 0, r0, nq).Data, ga.DQ.Data}, {"dK", attntest.Rows(g.DK, 0, k0, nk).Data, ga.DK.Data},
					{"dV", attntest.Rows(g.DV, 0, k0, nk).Data, ga.DV.Data}} {
					if !bitsEqual(x.got, x.want) {
						t.Errorf("sequence %d (Nq %d, Nk %d): %s differs from the sequence run alone", s, nq, nk, x.what)
					}
				}
			}
		})
	}
}

// TestVarlenErrors: bad cumulative lengths and shapes are typed errors, and
// the GPU refuses varlen (Auto runs it on the CPU, saying why).
func TestVarlenErrors(t *testing.T) {
	q := flashattn.Random(flashattn.Shape{B: 1, N: 6, H: 2, D: 8}, 1)
	k := flashattn.Random(flashattn.Shape{B: 1, N: 4, H: 1, D: 8}, 2)
	v := flashattn.Random(flashattn.Shape{B: 1, N: 4, H: 1, D: 8}, 3)
	good := flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 4}}
	for _, c := range []struct {
		name string
		vl   flashattn.Varlen
		arg  string
	}{
		{"one-entry", flashattn.Varlen{CuSeqlensQ: []int{6}, CuSeqlensK: []int{4}}, "cu_seqlens_q"},
		{"lengths-differ", flashattn.Varlen{CuSeqlensQ: []int{0, 6}, CuSeqlensK: []int{0, 2, 4}}, "cu_seqlens_k"},
		{"not-from-0", flashattn.Varlen{CuSeqlensQ: []int{1, 2, 6}, CuSeqlensK: []int{0, 3, 4}}, "cu_seqlens_q"},
		{"decreasing", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 2}}, "cu_seqlens_k"},
		{"short-of-N", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 5}, CuSeqlensK: []int{0, 3, 4}}, "cu_seqlens_q"},
		{"beyond-N", flashattn.Varlen{CuSeqlensQ: []int{0, 2, 6}, CuSeqlensK: []int{0, 3, 5}}, "cu_seqlens_k"},
	} {
		var de *flashattn.DataError
		if _, err := flashattn.ForwardVarlen(q, k, v, c.vl, nil); !errors.As(err, &de) || de.Arg != c.arg {
			t.Errorf("%s: %v, want *DataError for %s", c.name, err, c.arg)
		}
		if _, err := flashattn.BackwardVarlen(q, k, v, q, q, make([]float32, 12), c.vl, nil); !errors.As(err, &de) || de.Arg != c.arg {
			t.Errorf("%s backward: %v, want *DataError for %s", c.name, err, c.arg)
		}
	}
	var se *flashattn.ShapeError
	q2 := flashattn.Random(flashattn.Shape{B: 2, N: 3, H: 2, D: 8}, 1)
	k2 := flashattn.Random(flashattn.Shape{B: 2, N: 2, H: 1, D: 8}, 1)
	if _, err := flashattn.ForwardVarlen(q2, k2, k2, flashattn.Varlen{CuSeqlensQ: []int{0, 3}, CuSeqlensK: []int{0, 2}}, nil); !errors.As(err, &se) || se.Dim != "B" {
		t.Errorf("B = 2: %v, want *ShapeError for B", err)
	}
	var oe *flashattn.OptionError
	if _, err := flashattn.ForwardVarlen(q, k, v, good, &flashattn.Options{Trace: &flashattn.Trace{}}); !errors.As(err, &oe) || oe.Option != "Trace" {
		t.Errorf("Trace: %v, want *OptionError", err)
	}
	res, err := flashattn.ForwardVarlen(q, k, v, good, nil)
	if err != nil || res.Backend != flashattn.CPUFlash {
		t.Fatalf("Auto: %v, %v", res, err)
	}
	// A -Inf LSE on a row that sees keys in its own sequence is refused.
	lse := append([]float32(nil), res.LSE...)
	lse[2] = float32(math.Inf(-1)) // head 0, row 2: sequence 1's first row
	var de *flashattn.DataError
	if _, err := flashattn.BackwardVarlen(q, k, v, res.Out, q, lse, good, nil); !errors.As(err, &de) || de.Arg != "lse" {
		t.Errorf("-Inf LSE on a row with keys: %v, want *DataError for lse", err)
	}
}

// TestPackedMemoryLimit: varlen and decode calls count their host memory
// and are refused, before allocating, beyond HostMemoryLimit.
func TestPackedMemoryLimit(t *testing.T) {
	vc := attntest.VarlenCases()[0]
	q, k, v, dO := vc.Inputs()
	kvc := attntest.KVCases()[1] // paged: gathers its keys
	kq, _, _, kk, kv, cache := kvc.Inputs()
	old := flashattn.SetHostMemoryLimit(4096)
	t.Cleanup(func() { flashattn.SetHostMemoryLimit(old) })
	var me *flashattn.MemoryError
	if _, err := flashattn.ForwardVarlen(q, k, v, vc.Varlen(), nil); !errors.As(err, &me) {
		t.Errorf("ForwardVarlen: %v, want *MemoryError", err)
	}
	if _, err := flashattn.BackwardVarlen(q, k, v, q, dO, make([]float32, q.Shape.N*q.Shape.H), vc.Varlen(), nil); !errors.As(err, &me) {
		t.Errorf("BackwardVarlen: %v, want *MemoryError", err)
	}
	if _, err := flashattn.ForwardKVCache(kq, kk, kv, cache, nil); !errors.As(err, &me) {
		t.Errorf("ForwardKVCache: %v, want *MemoryError", err)
	}
}
