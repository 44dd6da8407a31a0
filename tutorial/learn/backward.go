package learn

import (
	"fmt"

	"github.com/goflash/goflash/flashattn"
)

// BwdStep is the body of the backward pass's inner loop, the learner's
// lines: key block j (Bc rows) meets query block i (Br rows).
//
//	P, dP       Br x Bc: P = exp(S - L_i) (0 where masked), dP = dO_i V_j^T
//	D           Br: D_i = rowsum(dO_i ∘ O_i)
//	Q, K, dO    Q_i (Br x d), K_j (Bc x d), dO_i (Br x d)
//	tau         the softmax scale (S = tau Q K^T)
//	dQ, dK, dV  dQ_i (Br x d), dK_j and dV_j (Bc x d), to be added to
type BwdStep func(P, dP [][]float32, D []float32, Q, K, dO [][]float32, tau float32, dQ, dK, dV [][]float32)

// Backward is FA2's backward pass (Algorithm 2 of the paper) with step as
// the body of its inner loop, from the forward pass's output o and
// log-sum-exp L (as flashattn.Forward returns them) and dO. It returns what
// flashattn.Backward does. A panic in step is returned as an error.
func Backward(q, k, v, o, dO *flashattn.Tensor, L []float32, t Tiles, step BwdStep) (g *flashattn.Grads, err error) {
	d, tau, err := t.setup(q, k, v)
	if err != nil {
		return nil, err
	}
	if o == nil || dO == nil {
		return nil, fmt.Errorf("learn: o and dO must not be nil")
	}
	if o.Shape != d.QShape() || dO.Shape != d.QShape() || len(L) != d.LSELen() {
		return nil, fmt.Errorf("learn: o %v, dO %v and %d LSE values do not fit q %v", o.Shape, dO.Shape, len(L), d.QShape())
	}
	for i, x := range [2]*flashattn.Tensor{o, dO} { // Data that holds every element
		if _, err := flashattn.FromStrided(x.Shape, x.Strides, x.Data); err != nil {
			return nil, fmt.Errorf("learn: %s: %w", [2]string{"o", "dO"}[i], err)
		}
	}
	defer catch(&err)
	Tr, Tc := ceilDiv(d.Nq, t.Br), ceilDiv(d.Nk, t.Bc)
	g = &flashattn.Grads{DQ: flashattn.New(d.QShape()), DK: flashattn.New(d.KVShape()), DV: flashattn.New(d.KVShape()),
		Reason: "tutorial/learn.Backward: the learner's step"}
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.Hq; h++ {
			kh := d.KVHead(h) // the query heads of a group add into the same dK, dV
			O, dOh := load(o, b, h, 0, d.Nq), load(dO, b, h, 0, d.Nq)
			D := make([]float32, d.Nq) // preprocessing: D_i = rowsum(dO_i ∘ O_i)
			for r := range D {
				for x := range O[r] {
					D[r] += dOh[r][x] * O[r][x]
				}
			}
			dQ := matrix(d.Nq, d.D)   // this head's dQ, added to by every key block
			for j := 0; j < Tc; j++ { // one key block: a thread block on a GPU
				c0, c1 := j*t.Bc, min((j+1)*t.Bc, d.Nk)
				Kj, Vj := load(k, b, kh, c0, c1), load(v, b, kh, c0, c1)
				dKj, dVj := matrix(c1-c0, d.D), matrix(c1-c0, d.D) // on-chip, written once
				for i := 0; i < Tr; i++ {
					r0, r1 := i*t.Br, min((i+1)*t.Br, d.Nq)
					if t.Causal && c0 > lastKey(d, r1-1) {
						continue // no row of Q_i sees a key of K_j: skipped
					}
					Qi, dOi := load(q, b, h, r0, r1), dOh[r0:r1]
					P := t.scores(d, tau, Qi, Kj, r0, c0) // S, then P = exp(S - L_i) in place
					for r := range P {
						Li := L[d.LSEIndex(b, h, r0+r)]
						for c := range P[r] {
							if Li == negInf { // the row sees no key: P = 0 (exp(-Inf - (-Inf)) would be NaN)
								P[r][c] = 0
							} else {
								P[r][c] = Exp(P[r][c] - Li) // a masked score, -Inf, gives 0
							}
						}
					}
					dP := matrix(r1-r0, c1-c0) // dP = dO_i V_j^T
					for r := range dP {
						for c := range dP[r] {
							for x := range Vj[c] {
								dP[r][c] += dOi[r][x] * Vj[c][x]
							}
						}
					}
					step(P, dP, D[r0:r1], Qi, Kj, dOi, tau, dQ[r0:r1], dKj, dVj) // your lines
				}
				if err := add(g.DK, b, kh, c0, dKj, "dK"); err != nil {
					return nil, err
				}
				if err := add(g.DV, b, kh, c0, dVj, "dV"); err != nil {
					return nil, err
				}
			}
			if err := store(g.DQ, b, h, 0, dQ, "dQ"); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// add adds the block rows into rows r0.. of head h of batch b of t.
func add(t *flashattn.Tensor, b, h, r0 int, rows [][]float32, name string) error {
	for r, row := range rows {
		if len(row) != t.Shape.D {
			return fmt.Errorf("row %d of %s has %d numbers, want d = %d: update %s[c][x] in place", r, name, len(row), t.Shape.D, name)
		}
		for x, y := range row {
			t.Set(b, r0+r, h, x, t.At(b, r0+r, h, x)+y)
		}
	}
	return nil
}
