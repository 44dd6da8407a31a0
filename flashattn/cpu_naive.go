package flashattn

import (
	"context"
	"math"
)

// naiveImpl is textbook attention, one (batch, head) at a time:
//
//	S = scale * Q K^T       (Nq x Nk, materialised; capped and biased by scoreMask.score)
//	P = softmax(S)          (Nq x Nk, materialised, row by row)
//	O = P V,  LSE = rowmax(S) + log(rowsum(exp(S - rowmax(S))))
//
// It keeps whole Nq x Nk matrices on purpose: that O(N^2) memory is what
// FlashAttention removes, and the memory test measures it against cpu_flash.go.
type naiveImpl struct{}

// naiveFwdLens lists the buffers of the forward pass, allocated once and
// reused for every (batch, head): Q, K, V gathered, S and P.
func naiveFwdLens(d Dims) []int {
	return []int{d.Nq * d.D, d.Nk * d.D, d.Nk * d.D, d.Nq * d.Nk, d.Nq * d.Nk}
}

// naiveBwdLens lists the buffers of the backward pass: K, V, dK, dV of one
// kv head; Q, O, dO, P, dP, dS of one query head.
func naiveBwdLens(d Dims) []int {
	kv, qd, nn := d.Nk*d.D, d.Nq*d.D, d.Nq*d.Nk
	return []int{kv, kv, kv, kv, qd, qd, qd, nn, nn, nn}
}

// hostBytes is what a call allocates beyond its outputs (the backward's
// per-goroutine dQ row included).
func (naiveImpl) hostBytes(p problem, o *Options, backward bool) float64 {
	if backward {
		return floats(naiveBwdLens(p.Dims)...) + float64(min(workers(o), p.Nq))*floats(p.D)
	}
	return floats(naiveFwdLens(p.Dims)...)
}

func (naiveImpl) forward(ctx context.Context, p problem, q, k, v *Tensor, o *Options, out *Tensor, lse []float32) error {
	d, w, mk, sc := p.Dims, workers(o), p.mask(), float32(p.Scale)
	bufs := slab(naiveFwdLens(d)...)
	Q, K, V, S, P := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4]
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.Hq; h++ {
			gather(Q, q, b, h)
			gather(K, k, b, d.KVHead(h))
			gather(V, v, b, d.KVHead(h))
			// Rows are independent: each goroutine owns whole rows of S, P and O.
			parallelFor(ctx, d.Nq, w, noScratch, func(_ struct{}, i int) {
				qi := Q[i*d.D : (i+1)*d.D]
				Si, Pi := S[i*d.Nk:(i+1)*d.Nk], P[i*d.Nk:(i+1)*d.Nk]
				// S_i = scale * q_i K^T; masked keys get -Inf so exp gives 0.
				rowMax := float32(math.Inf(-1))
				for j := range Si {
					if !mk.visible(i, j) {
						Si[j] = float32(math.Inf(-1))
						continue
					}
					Si[j], _ = mk.score(h, i, j, sc*dot(qi, K[j*d.D:(j+1)*d.D]))
					rowMax = max(rowMax, Si[j])
				}
				oi := out.Row(b, i, h)
				clear(oi)
				if !mk.seesAny(i) { // the mask hides every key: O = 0, LSE = -Inf
					clear(Pi)
					lse[d.LSEIndex(b, h, i)] = float32(math.Inf(-1))
					return
				}
				if rowMax == float32(math.Inf(-1)) {
					// Every visible score is -Inf (scale*q.k beyond float32):
					// no softmax exists. NaN, as cpu_flash.go gives.
					rowMax = float32(math.NaN())
				}
				// P_i = softmax(S_i), with the max subtracted so exp cannot overflow.
				var sum float32
				for j, s := range Si {
					Pi[j] = exp32(s - rowMax)
					sum += Pi[j]
				}
				for j := range Pi {
					Pi[j] /= sum
				}
				// O_i = P_i V.
				for j, p := range Pi {
					if p != 0 {
						axpy(p, V[j*d.D:(j+1)*d.D], oi)
					}
				}
				lse[d.LSEIndex(b, h, i)] = rowMax + log32(sum)
			})
		}
	}
	markNonFinite(ctx, p, q, k, v, out, lse, w)
	return stopped(ctx)
}

// backward materialises P, dP and dS (each Nq x Nk) for one (batch, head):
//
//	P  = exp(S - LSE)           (recomputed from the forward pass's LSE)
//	dV = P^T dO                 dP = dO V^T
//	Di = rowsum(dO * O)         dS = P * (dP - Di) * ds/dx (softcap's derivative)
//	dQ = scale * dS K           dK = scale * dS^T Q
//
// Query heads of one GQA group add into the same dK and dV; they are visited
// in order, so the sums are deterministic.
func (naiveImpl) backward(ctx context.Context, p problem, q, k, v, out, dOut *Tensor, lse []float32, o *Options, dq, dk, dv *Tensor) error {
	d, w, mk, sc := p.Dims, workers(o), p.mask(), float32(p.Scale)
	bufs := slab(naiveBwdLens(d)...)
	K, V, dK, dV, Q, O, dO, P, dP, dS := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5], bufs[6], bufs[7], bufs[8], bufs[9]
	for b := 0; b < d.B; b++ {
		for kh := 0; kh < d.Hkv; kh++ {
			gather(K, k, b, kh)
			gather(V, v, b, kh)
			clear(dK)
			clear(dV)
			for h := kh * d.Groups(); h < (kh+1)*d.Groups(); h++ {
				gather(Q, q, b, h)
				gather(O, out, b, h)
				gather(dO, dOut, b, h)
				clear(P)
				clear(dP)
				clear(dS)
				// Row pass: P, dP, dS and dQ of each row i.
				parallelFor(ctx, d.Nq, w, func() []float32 { return make([]float32, d.D) }, func(dqi []float32, i int) {
					qi, doi := Q[i*d.D:(i+1)*d.D], dO[i*d.D:(i+1)*d.D]
					L := lse[d.LSEIndex(b, h, i)]
					Di := dot(doi, O[i*d.D:(i+1)*d.D])
					clear(dqi)
					for j := 0; j < d.Nk; j++ {
						ij := i*d.Nk + j
						// A row with LSE -Inf saw no key: P = 0 there.
						if !mk.visible(i, j) || math.IsInf(float64(L), -1) {
							continue // P, dP, dS stay 0
						}
						kj, vj := K[j*d.D:(j+1)*d.D], V[j*d.D:(j+1)*d.D]
						s, dx := mk.score(h, i, j, sc*dot(qi, kj))
						P[ij] = exp32(s - L)
						dP[ij] = dot(doi, vj)
						dS[ij] = P[ij] * (dP[ij] - Di) * dx // the gradient of scale*q.k
						axpy(dS[ij], kj, dqi)
					}
					for x := range dqi {
						dqi[x] *= sc
					}
					dq.setRow(b, i, h, dqi)
				})
				// Column pass: key j's dV and dK read column j of P and dS.
				parallelFor(ctx, d.Nk, w, noScratch, func(_ struct{}, j int) {
					dvj, dkj := dV[j*d.D:(j+1)*d.D], dK[j*d.D:(j+1)*d.D]
					for i := 0; i < d.Nq; i++ {
						ij := i*d.Nk + j
						if P[ij] != 0 {
							axpy(P[ij], dO[i*d.D:(i+1)*d.D], dvj)
						}
						if dS[ij] != 0 {
							axpy(sc*dS[ij], Q[i*d.D:(i+1)*d.D], dkj)
						}
					}
				})
			}
			for j := 0; j < d.Nk; j++ {
				dk.setRow(b, j, kh, dK[j*d.D:(j+1)*d.D])
				dv.setRow(b, j, kh, dV[j*d.D:(j+1)*d.D])
			}
		}
	}
	return stopped(ctx)
}
