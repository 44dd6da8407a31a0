package flashattn

import (
	"context"
	"math"
	"slices"
)

// Non-finite inputs on the CPU (the package doc's rule). A NaN or an Inf
// that a row reaches (an element of its q row, or of the k or v row of a
// key its mask lets it see) makes the row NaN, output and LSE, on both CPU
// backends: the tile loops alone would drop one whose softmax weight
// rounds to 0 in float32 (a V value times exp(-200), which float64 and
// PyTorch carry), one a softcap bounds (tanh(Inf) = 1) and a key whose
// score is -Inf. A row the mask hides every key from reaches nothing
// (output 0, LSE -Inf), and a key the mask hides is not reached. The
// inputs are scanned once per call, after the tiles; only where the scan
// finds one are rows looked at one by one.

// scanChunk is how many elements one goroutine of the scan takes at least:
// smaller calls scan on one.
const scanChunk = 1 << 15

// markNonFinite makes the rows of a forward pass (problem p, inputs q, k,
// v, outputs out and lse) that reach a non-finite input NaN, output and
// LSE. It does nothing once ctx is done (the call's result is dropped).
func markNonFinite(ctx context.Context, p problem, q, k, v, out *Tensor, lse []float32, w int) {
	if isDone(ctx) || allFinite(ctx, q, w) && allFinite(ctx, k, w) && allFinite(ctx, v, w) || isDone(ctx) {
		return
	}
	d, mk := p.Dims, p.mask()
	nan := float32(math.NaN())
	var bad []int // the keys of one (batch, kv head) with a non-finite k or v row, in order
	for b := 0; b < d.B; b++ {
		for kh := 0; kh < d.Hkv; kh++ {
			bad = bad[:0]
			for j := 0; j < d.Nk; j++ {
				if !k.finiteRow(b, j, kh) || !v.finiteRow(b, j, kh) {
					bad = append(bad, j)
				}
			}
			for h := kh * d.Groups(); h < (kh+1)*d.Groups(); h++ {
				for i := 0; i < d.Nq; i++ {
					lo, hi := mk.keys(i)
					if lo > hi {
						continue // sees no key: output 0, LSE -Inf
					}
					if x, _ := slices.BinarySearch(bad, lo); q.finiteRow(b, i, h) && (x == len(bad) || bad[x] > hi) {
						continue
					}
					for x := 0; x < d.D; x++ {
						out.Set(b, i, h, x, nan)
					}
					lse[d.LSEIndex(b, h, i)] = nan
				}
			}
		}
	}
}

// allFinite reports whether every element t's shape reaches is finite,
// scanning rows of (b, n) on up to w goroutines for a large t. A done ctx
// stops it early (its answer does not matter then).
func allFinite(ctx context.Context, t *Tensor, w int) bool {
	s := t.Shape
	rows, per := s.B*s.N, s.H*s.D
	jobs := max(1, min(w, rows*per/scanChunk))
	if jobs == 1 {
		return t.finiteRows(0, rows)
	}
	found := make([]bool, jobs) // a non-finite element in job i's rows
	step := ceilDiv(rows, jobs)
	parallelFor(ctx, jobs, jobs, noScratch, func(_ struct{}, i int) {
		found[i] = !t.finiteRows(i*step, min(rows, (i+1)*step))
	})
	return !slices.Contains(found, true)
}

// finiteRows reports whether every element of rows [r0, r1) of t, a row
// being one (b, n) with all its heads, is finite.
func (t *Tensor) finiteRows(r0, r1 int) bool {
	for r := r0; r < r1; r++ {
		b, n := r/t.Shape.N, r%t.Shape.N
		for h := 0; h < t.Shape.H; h++ {
			if !t.finiteRow(b, n, h) {
				return false
			}
		}
	}
	return true
}

// finiteRow reports whether the D values of row (b, n, h) of t are finite:
// x*0 is 0 for a finite x and NaN for a NaN or an Inf, in four sums.
func (t *Tensor) finiteRow(b, n, h int) bool {
	o, sd, dd := t.Offset(b, n, h, 0), t.Strides[3], t.Shape.D
	var z0, z1, z2, z3 float32
	if sd == 1 {
		x := t.Data[o : o+dd]
		i := 0
		for ; i+4 <= len(x); i += 4 {
			z0 += x[i] * 0
			z1 += x[i+1] * 0
			z2 += x[i+2] * 0
			z3 += x[i+3] * 0
		}
		for ; i < len(x); i++ {
			z0 += x[i] * 0
		}
	} else {
		for i := 0; i < dd; i++ {
			z0 += t.Data[o+i*sd] * 0
		}
	}
	return z0+z1+z2+z3 == 0
}
