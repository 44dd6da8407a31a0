package attntest

import "math"

// Error bounds for float32 backends.
//
// The 2x-baseline rule is statistical: it compares one backend's largest
// error with that of a few other float32 evaluation orders. On small or
// sharply peaked problems the largest error is decided by a handful of
// roundings, and a correct backend can land far beyond 2x (measured over
// 30000 random problems with N <= 69, D <= 40 and score standard deviation
// <= 16: 0.25% of them, needing up to 11x). For arbitrary inputs (the fuzz
// test) the suite therefore also offers a deterministic check: for every
// element, |backend - truth| <= a first-order bound on the rounding error of
// the textbook algorithm in float32, valid for any summation order and for
// FA2's rescaling (Higham's gamma_n = n*u/(1 - n*u) times sums of absolute
// values, u = 2^-24). It is looser than typical errors (worst-case signs,
// gamma_D where sqrt(D)*u is typical) but never wrong for a correct float32
// backend, and far below the effect of a real bug. Checked on the same 30000
// problems with scales up to 16 (scores of standard deviation up to ~100):
// no element of either CPU backend beyond it, the largest at 0.61 of it,
// the median problem's largest at 0.06.
//
// Per visible row i and key j, with A_ij = |scale| sum_x |q_ix k_jx|,
// P = softmax, R_i = max_j s_ij - min_j s_ij over visible keys, n_i = their
// number:
//
//	es_ij  = gamma_D A_ij + 2u |s_ij|                  score (dot, scale)
//	eP_ij  = es_ij + u (|s_ij - m_i| + 1) + u (2 n_i + R_i)
//	         (s - m, exp; FA2's rescaling by exp(m_old - m_new), at most
//	          n_i times, whose arguments sum to at most R_i)
//	el_i   = sum_j P_ij eP_ij + gamma_n                 the row sum l
//	dO_ix  = sum_j P_ij eP_ij |v_jx| + gamma_(n+1) sum_j P_ij |v_jx| + |O_ix| (el_i + 2u)
//	dLSE_i = sum_j P_ij eP_ij + gamma_n + u (|log l_i| + |LSE_i|)
//
// and for the gradients (M_j the number of (head, row) pairs that see key j):
//
//	eQ_ij  = es_ij + dLSE_i + u (|s_ij - LSE_i| + 1)   P = exp(s - LSE)
//	dD_i   = gamma_D sum_x |dO_ix O_ix| + sum_x |dO_ix| dO_ix
//	dg_ij  = gamma_D sum_x |dO_ix v_jx| + dD_i + u |dP_ij - D_i|
//	ddS_ij = P_ij (eQ_ij |dP_ij - D_i| + dg_ij + u |dP_ij - D_i|)
//	ddQ_ix = |scale| (sum_j ddS_ij |k_jx| + gamma_(n+1) sum_j |dS_ij k_jx|) + u |dQ_ix|
//	ddK_jx = |scale| (sum ddS_ij |q_ix| + gamma_(M+1) sum |dS_ij q_ix|) + u |dK_jx|
//	ddV_jx = sum P_ij eQ_ij |dO_ix| + gamma_M sum P_ij |dO_ix|
//
// With a softcap or ALiBi the score s is c*tanh(x/c) - bias of the scaled
// product x; both steps shrink x's error (|ds/dx| <= 1) and add roundings,
// so es_ij gains u |x_ij| + 4u (|s_ij| + |bias_ij|) (x in its gamma_D and 2u
// terms). The softcap's derivative 1 - t^2 has an absolute error of at most
// ed_ij = 2 es_ij / c + 4u, so the gradient of x, dS_ij (1 - t^2), has
// ddS_ij (1 - t^2) + P_ij |dP_ij - D_i| ed_ij + u |dS_ij (1 - t^2)|, which takes
// the place of ddS_ij and dS_ij in ddQ and ddK.
//
// Terms whose P is below 2^-100 may underflow in float32 (exp(s - m) flushes
// to 0 below about 2^-149) and count in full; every bound gets an absolute
// 2^-120 for subnormal arithmetic. Second-order terms (products of two
// roundings) are covered by scaling the bounds by 1 + 2^-10.
//
// gamma_n exists only for n u < 1: from n = 2^24 on (a head dim, a row's
// visible keys or a key's rows) it is +Inf, and so is every bound it enters
// (a product of +Inf and 0 included): there is no first-order bound, and
// the check of those elements passes whatever their error, leaving them to
// the 2x-baseline rule. A bound is never negative or NaN.

const (
	u32  = 0x1p-24
	tiny = 0x1p-100 // P below this may be flushed to 0 in float32
)

// gamma is Higham's gamma_n = n u / (1 - n u), +Inf where n u >= 1.
func gamma(n int) float64 {
	nu := float64(n) * u32
	if nu >= 1 {
		return math.Inf(1)
	}
	return nu / (1 - nu)
}

// bounds fills r's float32 error bounds from the inputs and the truth.
func (p *problem) bounds(r *Ref) {
	d := p.d
	r.bOut, r.bLSE = make([]float64, len(r.Out)), make([]float64, len(r.LSE))
	grads := r.DQ != nil
	if grads {
		r.bDQ, r.bDK, r.bDV = make([]float64, len(r.DQ)), make([]float64, len(r.DK)), make([]float64, len(r.DV))
	}
	// First pass: forward bounds, and M_j (rows seeing each key, per kv head).
	M := make([]int, d.B*d.Hkv*d.Nk)
	as := math.Abs(p.scale)
	// scratch is one goroutine's rows of scores and their bounds.
	type scratch struct{ s, A, P, E, DX []float64 } // E: es_ij, DX: ds/dx
	newScratch := func() *scratch {
		return &scratch{make([]float64, d.Nk), make([]float64, d.Nk), make([]float64, d.Nk), make([]float64, d.Nk), make([]float64, d.Nk)}
	}
	rowBound := func(sc *scratch, b, h, i int) (n int, m, R float64) {
		s, A, P, E, DX := sc.s, sc.A, sc.P, sc.E, sc.DX
		Q, K := p.q[p.qh(b, h)], p.k[p.kvh(b, h)]
		m, lo := math.Inf(-1), math.Inf(1)
		for j := 0; j < d.Nk; j++ {
			P[j] = 0
			if !p.sees(i, j) {
				continue
			}
			qi, kj := Q[i*d.D:(i+1)*d.D], K[j*d.D:(j+1)*d.D]
			x := p.scale * dot64(qi, kj)
			var bias float64
			s[j], DX[j], bias = p.score(h, i, j, x)
			A[j] = as * absDot(qi, kj)
			E[j] = gamma(d.D)*A[j] + 2*u32*math.Abs(x)
			if p.mods() {
				E[j] += u32*math.Abs(x) + 4*u32*(math.Abs(s[j])+math.Abs(bias))
			}
			m, lo = math.Max(m, s[j]), math.Min(lo, s[j])
			n++
		}
		row := (b*d.Hq+h)*d.Nq + i
		for j := 0; j < d.Nk; j++ {
			if p.sees(i, j) {
				P[j] = math.Exp(s[j] - r.LSE[row])
			}
		}
		return n, m, m - lo
	}
	p.forGroups(func(b, kv int) {
		sc := newScratch()
		s, P, E := sc.s, sc.P, sc.E
		for h := kv * p.groups; h < (kv+1)*p.groups; h++ {
			V := p.v[p.kvh(b, h)]
			for i := 0; i < d.Nq; i++ {
				row := (b*d.Hq+h)*d.Nq + i
				if r.Masked[row] {
					continue // exact values are checked exactly
				}
				n, m, R := rowBound(sc, b, h, i)
				eP := func(j int) float64 {
					if P[j] < tiny {
						return 1 // the whole term may be lost
					}
					return E[j] + u32*(math.Abs(s[j]-m)+1) + u32*(2*float64(n)+R)
				}
				el, sumPe := gamma(n), 0.0
				for j := 0; j < d.Nk; j++ {
					if P[j] == 0 {
						continue
					}
					M[(b*d.Hkv+h/p.groups)*d.Nk+j]++
					sumPe += P[j] * eP(j)
				}
				el += sumPe
				qo := ((b*d.Nq+i)*d.Hq + h) * d.D
				o, bo := r.Out[qo:][:d.D], r.bOut[qo:][:d.D]
				for j := 0; j < d.Nk; j++ {
					if P[j] == 0 {
						continue
					}
					e := eP(j)
					for x := range bo {
						bo[x] += P[j] * (e + gamma(n+1)) * math.Abs(V[j*d.D+x])
					}
				}
				for x := range bo {
					bo[x] += math.Abs(o[x]) * (el + 2*u32)
				}
				l := math.Exp(r.LSE[row] - m)
				r.bLSE[row] = sumPe + gamma(n) + u32*(math.Abs(math.Log(l))+math.Abs(r.LSE[row]))
			}
		}
	})
	if grads {
		p.forGroups(func(b, kv int) {
			sc := newScratch()
			s, P, E, DX := sc.s, sc.P, sc.E, sc.DX
			for h := kv * p.groups; h < (kv+1)*p.groups; h++ {
				Q, K, V, dO := p.q[p.qh(b, h)], p.k[p.kvh(b, h)], p.v[p.kvh(b, h)], p.dO[p.qh(b, h)]
				for i := 0; i < d.Nq; i++ {
					row := (b*d.Hq+h)*d.Nq + i
					if r.Masked[row] {
						continue
					}
					n, _, _ := rowBound(sc, b, h, i)
					qo := ((b*d.Nq+i)*d.Hq + h) * d.D
					qi, doi, oi := Q[i*d.D:(i+1)*d.D], dO[i*d.D:(i+1)*d.D], r.Out[qo:][:d.D]
					Di := dot64(doi, oi)
					dD := gamma(d.D) * absDot(doi, oi)
					for x := range doi {
						dD += math.Abs(doi[x]) * r.bOut[qo+x]
					}
					bq, dq := r.bDQ[qo:][:d.D], r.DQ[qo:][:d.D]
					for j := 0; j < d.Nk; j++ {
						if P[j] == 0 {
							continue
						}
						kj, vj := K[j*d.D:(j+1)*d.D], V[j*d.D:(j+1)*d.D]
						g := dot64(doi, vj) - Di
						eQ := E[j] + r.bLSE[row] + u32*(math.Abs(s[j]-r.LSE[row])+1)
						dg := gamma(d.D)*absDot(doi, vj) + dD + u32*math.Abs(g)
						if P[j] < tiny {
							eQ = 1 // the whole term may be lost
						}
						ddS := P[j] * (eQ*math.Abs(g) + dg + u32*math.Abs(g))
						dS := P[j] * g
						if p.softcap > 0 { // on to the gradient of x
							ed := 2*E[j]/p.softcap + 4*u32
							dS *= DX[j]
							ddS = ddS*DX[j] + P[j]*math.Abs(g)*ed + u32*math.Abs(dS)
						}
						Mj := M[(b*d.Hkv+kv)*d.Nk+j]
						kvo := ((b*d.Nk+j)*d.Hkv + kv) * d.D
						bk, bv := r.bDK[kvo:][:d.D], r.bDV[kvo:][:d.D]
						for x := 0; x < d.D; x++ {
							bq[x] += as * (ddS + gamma(n+1)*math.Abs(dS)) * math.Abs(kj[x])
							bk[x] += as * (ddS + gamma(Mj+1)*math.Abs(dS)) * math.Abs(qi[x])
							bv[x] += P[j] * (eQ + gamma(Mj)) * math.Abs(doi[x])
						}
					}
					for x := range bq {
						bq[x] += u32 * math.Abs(dq[x])
					}
				}
			}
		})
		for x := range r.bDK {
			r.bDK[x] += u32 * math.Abs(r.DK[x])
		}
	}
	for _, bs := range [][]float64{r.bOut, r.bLSE, r.bDQ, r.bDK, r.bDV} {
		for x := range bs {
			if math.IsNaN(bs[x]) { // +Inf (gamma beyond n u >= 1) times 0
				bs[x] = math.Inf(1)
			}
			bs[x] = bs[x]*(1+0x1p-10) + 0x1p-120
		}
	}
}

func absDot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += math.Abs(a[i] * b[i])
	}
	return s
}
