package attntest

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/goflash/goflash/flashattn"
)

// Ref is one attention problem's result, dense and in float64: Out and DQ
// are (B, Nq, Hq, D), DK and DV (B, Nk, Hkv, D), LSE (B, Hq, Nq). DQ, DK and
// DV are nil when no dOut was given. Masked[r] is true for the LSE rows that
// see no key (causal with Nq > Nk): their Out and DQ are 0, their LSE -Inf.
type Ref struct {
	Dims                 flashattn.Dims
	Out, LSE, DQ, DK, DV []float64
	Masked               []bool
	Causal               bool
	Scale                float64
	Precision            Precision // FP32, FP16 or BF16 for a baseline; -1 for the float64 truth

	outMax, lseMax float64
	gradMax        [3]float64 // dQ, dK, dV

	// Per-element float32 error bounds (truth only; see bound.go).
	bOut, bLSE, bDQ, bDK, bDV []float64
	// The baseline in every summation order, this one first (baselines only).
	orders []*Ref
}

// problem holds one problem's inputs as dense float64 per (batch, head),
// read through Tensor.At so that any strides work, and the mask and score
// rules written out again here, independent of the backends' code.
type problem struct {
	d                  flashattn.Dims
	q, k, v, dO        [][]float64 // [b*H+h][n*D+x]
	causal             bool
	scale              float64
	groups, causalDiag int
	left, right        int       // the window around the diagonal key, -1: open
	softcap            float64   // 0: none
	alibi              []float64 // nil, or a slope per query head
}

// Scores are the score modifiers of flashattn.Options beyond the causal
// mask: a sliding window, softcap, ALiBi slopes (zero value: none).
type Scores struct {
	Window  *flashattn.Window
	Softcap float64
	ALiBi   []float64
}

// ScoresOf returns the score modifiers of o.
func ScoresOf(o *flashattn.Options) Scores {
	if o == nil {
		return Scores{}
	}
	return Scores{Window: o.Window, Softcap: o.Softcap, ALiBi: o.ALiBi}
}

func newProblem(q, k, v, dOut *flashattn.Tensor, causal bool, scale float64, mods Scores, round func(float64) float64) *problem {
	d := flashattn.Dims{B: q.Shape.B, Nq: q.Shape.N, Nk: k.Shape.N, Hq: q.Shape.H, Hkv: k.Shape.H, D: q.Shape.D}
	p := &problem{d: d, causal: causal, scale: scale, groups: d.Hq / d.Hkv, causalDiag: d.Nk - d.Nq,
		left: -1, right: -1, softcap: mods.Softcap, alibi: mods.ALiBi}
	if mods.Window != nil {
		p.left, p.right = mods.Window.Left, mods.Window.Right
	}
	if causal {
		p.right = 0
	}
	p.q, p.k, p.v = heads(q, round), heads(k, round), heads(v, round)
	if dOut != nil {
		p.dO = heads(dOut, round)
	}
	return p
}

func heads(t *flashattn.Tensor, round func(float64) float64) [][]float64 {
	s := t.Shape
	hs := make([][]float64, s.B*s.H)
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.H; h++ {
			m := make([]float64, s.N*s.D)
			for n := 0; n < s.N; n++ {
				for x := 0; x < s.D; x++ {
					m[n*s.D+x] = round(float64(t.At(b, n, h, x)))
				}
			}
			hs[b*s.H+h] = m
		}
	}
	return hs
}

// sees reports whether query row i may attend to key j. Row i's diagonal
// key is i + Nk - Nq (bottom-right alignment); key j lies back = diagonal - j
// before it, and is visible iff -right <= back <= left, an open side being -1
// (causal: right = 0).
func (p *problem) sees(i, j int) bool {
	back := i + p.causalDiag - j
	return (p.right < 0 || -back <= p.right) && (p.left < 0 || back <= p.left)
}

// score turns x = scale*q_i.k_j of query head h into what the softmax sees:
// softcap*tanh(x/softcap), then minus slope_h*|i + Nk - Nq - j|. dx is ds/dx.
func (p *problem) score(h, i, j int, x float64) (s, dx float64, bias float64) {
	s, dx = x, 1
	if p.softcap > 0 {
		t := math.Tanh(x / p.softcap)
		s, dx = p.softcap*t, 1-t*t
	}
	if p.alibi != nil {
		bias = -p.alibi[h] * math.Abs(float64(i+p.causalDiag-j))
	}
	return s + bias, dx, bias
}

// score32 is score in float32 arithmetic, as a float32 backend computes it,
// with the softcap's tanh rounded to prec: FA2's rule computes its baseline
// in the input dtype (its attention_ref without upcast: fp16/bf16 scores,
// their tanh rounded to that dtype), and its kernels use the hardware
// tanh.approx (relative error 2^-11, fp16's unit roundoff), as GoFlash's do.
// The scores themselves stay float32 here, stricter than FA2's baseline.
func (p *problem) score32(h, i, j int, x float32, prec Precision) (s, dx float32) {
	s, dx = x, 1
	if p.softcap > 0 {
		c := float32(p.softcap)
		t := prec.round(float32(math.Tanh(float64(x / c))))
		s, dx = c*t, 1-t*t
	}
	if p.alibi != nil {
		s -= float32(p.alibi[h]) * float32(math.Abs(float64(i+p.causalDiag-j)))
	}
	return s, dx
}

// mods reports whether the problem modifies its scores (softcap, ALiBi).
func (p *problem) mods() bool { return p.softcap > 0 || p.alibi != nil }

func (p *problem) qh(b, h int) int  { return b*p.d.Hq + h }
func (p *problem) kvh(b, h int) int { return b*p.d.Hkv + h/p.groups }

// refWorkers caps the goroutines a reference runs on (0: GOMAXPROCS).
var refWorkers = 0

// parallel runs f(0), ..., f(n-1) on up to refWorkers goroutines, each
// taking the next index as it finishes one.
func parallel(n int, f func(i int)) {
	w := refWorkers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(w, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// forGroups runs f(b, kv) for every (batch, kv head) pair in parallel. A
// pair owns its query heads' rows and its K and V rows, into which only its
// own heads accumulate, in the order f takes them: the result does not
// depend on the split.
func (p *problem) forGroups(f func(b, kv int)) {
	parallel(p.d.B*p.d.Hkv, func(i int) { f(i/p.d.Hkv, i%p.d.Hkv) })
}

// forRows runs f(b, h, i0, i1) for every query head's rows [i0, i1), in
// blocks of 32 rows, in parallel: for the forward, where each row is
// computed on its own (the result does not depend on the split), so that a
// case of one (batch, kv head) pair still spreads over every core.
func (p *problem) forRows(f func(b, h, i0, i1 int)) {
	const rows = 32
	blocks := (p.d.Nq + rows - 1) / rows
	parallel(p.d.B*p.d.Hq*blocks, func(u int) {
		bh, blk := u/blocks, u%blocks
		f(bh/p.d.Hq, bh%p.d.Hq, blk*rows, min((blk+1)*rows, p.d.Nq))
	})
}

// Reference computes attention and, when dOut is not nil, its gradients in
// float64 from q, k, v (and dOut): the truth every backend is measured against.
// scale is the softmax scale actually used (not 0).
func Reference(q, k, v, dOut *flashattn.Tensor, causal bool, scale float64) *Ref {
	return ReferenceScores(q, k, v, dOut, causal, scale, Scores{})
}

// ReferenceScores is Reference with a window, softcap or ALiBi slopes.
func ReferenceScores(q, k, v, dOut *flashattn.Tensor, causal bool, scale float64, mods Scores) *Ref {
	p := newProblem(q, k, v, dOut, causal, scale, mods, func(x float64) float64 { return x })
	d := p.d
	r := newRef(d, causal, scale, dOut != nil)
	r.Precision = -1
	p.forRows(func(b, h, i0, i1 int) {
		s := make([]float64, d.Nk)
		Q, K, V := p.q[p.qh(b, h)], p.k[p.kvh(b, h)], p.v[p.kvh(b, h)]
		for i := i0; i < i1; i++ {
			row := (b*d.Hq+h)*d.Nq + i
			m := math.Inf(-1)
			for j := range s {
				s[j] = math.Inf(-1)
				if p.sees(i, j) {
					s[j], _, _ = p.score(h, i, j, scale*dot64(Q[i*d.D:(i+1)*d.D], K[j*d.D:(j+1)*d.D]))
					m = math.Max(m, s[j])
				}
			}
			if math.IsInf(m, -1) {
				r.Masked[row], r.LSE[row] = true, math.Inf(-1)
				continue // Out row stays 0
			}
			l := 0.0
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				l += s[j]
			}
			o := r.Out[((b*d.Nq+i)*d.Hq+h)*d.D:][:d.D]
			for j, e := range s {
				for x := range o {
					o[x] += e / l * V[j*d.D+x]
				}
			}
			r.LSE[row] = m + math.Log(l)
		}
	})
	if dOut != nil {
		p.backward64(r)
	}
	p.bounds(r)
	r.summarise()
	return r
}

// backward64: P = exp(S - LSE), dV = P^T dO, dP = dO V^T, Di = rowsum(dO*O),
// dS = P*(dP - Di) ds/dx (x = scale q.k: softcap's derivative), dQ = scale dS K,
// dK = scale dS^T Q; dK and dV summed over the query heads of each GQA group.
func (p *problem) backward64(r *Ref) {
	d := p.d
	p.forGroups(func(b, kv int) {
		for h := kv * p.groups; h < (kv+1)*p.groups; h++ {
			Q, K, V, dO := p.q[p.qh(b, h)], p.k[p.kvh(b, h)], p.v[p.kvh(b, h)], p.dO[p.qh(b, h)]
			for i := 0; i < d.Nq; i++ {
				row := (b*d.Hq+h)*d.Nq + i
				if r.Masked[row] {
					continue
				}
				qo := ((b*d.Nq+i)*d.Hq + h) * d.D
				qi, doi := Q[i*d.D:(i+1)*d.D], dO[i*d.D:(i+1)*d.D]
				Di := dot64(doi, r.Out[qo:][:d.D])
				dq := r.DQ[qo:][:d.D]
				for j := 0; j < d.Nk; j++ {
					if !p.sees(i, j) {
						continue
					}
					kj, vj := K[j*d.D:(j+1)*d.D], V[j*d.D:(j+1)*d.D]
					x, dx, _ := p.score(h, i, j, p.scale*dot64(qi, kj))
					P := math.Exp(x - r.LSE[row])
					dS := P * (dot64(doi, vj) - Di) * dx
					kvo := ((b*d.Nk+j)*d.Hkv + kv) * d.D
					dk, dv := r.DK[kvo:][:d.D], r.DV[kvo:][:d.D]
					for x := 0; x < d.D; x++ {
						dq[x] += p.scale * dS * kj[x]
						dk[x] += p.scale * dS * qi[x]
						dv[x] += P * doi[x]
					}
				}
			}
		}
	})
}

// Baseline computes the same textbook attention in a backend's precision:
// FP32 does every operation in float32; FP16 (BF16) rounds the inputs, P (before
// P V and P^T dO), dS (before dS K and dS^T Q) and the outputs to fp16 (bf16) and
// accumulates in float32, as a tensor-core kernel does. The textbook fixes
// no summation order and one order alone can be lucky (its dot products
// dO.v and dO.O rounding alike, say), so it is computed in every order of
// orders: the returned Ref holds the sequential one in its fields and the
// others for the checks, which allow a correct backend twice the largest
// error of any of them against Reference.
func Baseline(prec Precision, q, k, v, dOut *flashattn.Tensor, causal bool, scale float64) *Ref {
	return BaselineScores(prec, q, k, v, dOut, causal, scale, Scores{})
}

// BaselineScores is Baseline with a window, softcap or ALiBi slopes.
func BaselineScores(prec Precision, q, k, v, dOut *flashattn.Tensor, causal bool, scale float64, mods Scores) *Ref {
	rs := make([]*Ref, len(orders))
	var wg sync.WaitGroup
	for i, o := range orders { // each order on its own: a problem and Ref of its own
		wg.Go(func() { rs[i] = baseline(o, prec, q, k, v, dOut, causal, scale, mods) })
	}
	wg.Wait()
	rs[0].orders = rs
	return rs[0]
}

// Baselines returns the baseline of Baseline in each summation order
// separately, the sequential one first (for reports of each order's error).
func Baselines(prec Precision, q, k, v, dOut *flashattn.Tensor, causal bool, scale float64) []*Ref {
	return Baseline(prec, q, k, v, dOut, causal, scale).all()
}

// all returns the baseline in every order it was computed in.
func (r *Ref) all() []*Ref {
	if r.orders == nil {
		return []*Ref{r}
	}
	return r.orders
}

// order is one evaluation order of the float32 sums.
type order int

const (
	sequential order = iota // every sum in index order
	reversed                // every sum in reverse order, except Di = dO.O
	pairwise                // dot products by halving (a GPU's tree reduction); Di sequential
)

var orders = []order{sequential, reversed, pairwise}

// dot sums a score or dP = dO.v in the order's way; Di = dO.O is always
// sequential, as a separate kernel (FA2's preprocessing) may compute it.
func (o order) dot(a, b []float64) float32 {
	switch o {
	case reversed:
		var s float32
		for i := len(a) - 1; i >= 0; i-- {
			s += float32(a[i]) * float32(b[i])
		}
		return s
	case pairwise:
		if len(a) > 8 {
			h := len(a) / 2
			return o.dot(a[:h], b[:h]) + o.dot(a[h:], b[h:])
		}
	}
	return dot32(a, b)
}

// index returns the n-th index of a loop over [0, len) in the order's direction.
func (o order) index(n, length int) int {
	if o == reversed {
		return length - 1 - n
	}
	return n
}

func baseline(ord order, prec Precision, q, k, v, dOut *flashattn.Tensor, causal bool, scale float64, mods Scores) *Ref {
	rnd := prec.round
	p := newProblem(q, k, v, dOut, causal, scale, mods, func(x float64) float64 { return float64(rnd(float32(x))) })
	d := p.d
	r := newRef(d, causal, scale, dOut != nil)
	r.Precision = prec
	sc := float32(scale)
	p.forRows(func(b, h, i0, i1 int) {
		s := make([]float32, d.Nk)
		o := make([]float32, d.D)
		Q, K, V := p.q[p.qh(b, h)], p.k[p.kvh(b, h)], p.v[p.kvh(b, h)]
		for i := i0; i < i1; i++ {
			row := (b*d.Hq+h)*d.Nq + i
			m := float32(math.Inf(-1))
			for j := range s {
				s[j] = float32(math.Inf(-1))
				if p.sees(i, j) {
					s[j], _ = p.score32(h, i, j, sc*ord.dot(Q[i*d.D:(i+1)*d.D], K[j*d.D:(j+1)*d.D]), prec)
					m = max(m, s[j])
				}
			}
			if math.IsInf(float64(m), -1) {
				r.Masked[row], r.LSE[row] = true, math.Inf(-1)
				continue
			}
			var l float32
			for n := range s {
				j := ord.index(n, d.Nk)
				s[j] = float32(math.Exp(float64(s[j] - m)))
				l += s[j]
			}
			clear(o)
			for n := range s {
				j := ord.index(n, d.Nk)
				P := rnd(s[j] / l)
				for x := range o {
					o[x] += P * float32(V[j*d.D+x])
				}
			}
			for x, ox := range o {
				r.Out[((b*d.Nq+i)*d.Hq+h)*d.D+x] = float64(rnd(ox))
			}
			r.LSE[row] = float64(m + float32(math.Log(float64(l))))
		}
	})
	if dOut != nil {
		p.backward32(r, ord, rnd)
	}
	r.summarise()
	return r
}

func (p *problem) backward32(r *Ref, ord order, rnd func(float32) float32) {
	d := p.d
	sc := float32(p.scale)
	dK := make([]float32, d.B*d.Nk*d.Hkv*d.D)
	dV := make([]float32, len(dK))
	p.forGroups(func(b, kv int) {
		dq := make([]float32, d.D)
		for nh := 0; nh < p.groups; nh++ { // the group's heads in the order's direction
			h := kv*p.groups + ord.index(nh, p.groups)
			Q, K, V, dO := p.q[p.qh(b, h)], p.k[p.kvh(b, h)], p.v[p.kvh(b, h)], p.dO[p.qh(b, h)]
			for ni := 0; ni < d.Nq; ni++ {
				i := ord.index(ni, d.Nq)
				row := (b*d.Hq+h)*d.Nq + i
				clear(dq)
				if !r.Masked[row] {
					qi, doi := Q[i*d.D:(i+1)*d.D], dO[i*d.D:(i+1)*d.D]
					Di := dot32(doi, r.Out[((b*d.Nq+i)*d.Hq+h)*d.D:][:d.D])
					L := float32(r.LSE[row])
					for nj := 0; nj < d.Nk; nj++ {
						j := ord.index(nj, d.Nk)
						if !p.sees(i, j) {
							continue
						}
						kj, vj := K[j*d.D:(j+1)*d.D], V[j*d.D:(j+1)*d.D]
						x, dx := p.score32(h, i, j, sc*ord.dot(qi, kj), r.Precision)
						P := float32(math.Exp(float64(x - L)))
						dS := rnd(P * (ord.dot(doi, vj) - Di) * dx)
						Pr := rnd(P)
						base := ((b*d.Nk+j)*d.Hkv + kv) * d.D
						for x := 0; x < d.D; x++ {
							dq[x] += dS * float32(kj[x])
							dK[base+x] += dS * float32(qi[x])
							dV[base+x] += Pr * float32(doi[x])
						}
					}
				}
				for x, g := range dq {
					r.DQ[((b*d.Nq+i)*d.Hq+h)*d.D+x] = float64(rnd(sc * g))
				}
			}
		}
	})
	for x := range dK {
		r.DK[x], r.DV[x] = float64(rnd(sc*dK[x])), float64(rnd(dV[x]))
	}
}

func newRef(d flashattn.Dims, causal bool, scale float64, grads bool) *Ref {
	r := &Ref{Dims: d, Causal: causal, Scale: scale,
		Out: make([]float64, d.QShape().Numel()), LSE: make([]float64, d.LSELen()), Masked: make([]bool, d.LSELen())}
	if grads {
		r.DQ = make([]float64, d.QShape().Numel())
		r.DK = make([]float64, d.KVShape().Numel())
		r.DV = make([]float64, d.KVShape().Numel())
	}
	return r
}

// summarise records the largest magnitudes, used for the absolute floor of
// the tolerance.
func (r *Ref) summarise() {
	r.outMax, r.lseMax = maxAbs(r.Out), maxAbs(r.LSE)
	r.gradMax = [3]float64{maxAbs(r.DQ), maxAbs(r.DK), maxAbs(r.DV)}
}

func maxAbs(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		if !math.IsInf(x, 0) {
			m = math.Max(m, math.Abs(x))
		}
	}
	return m
}

func dot64(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// dot32 sums in float32, in order: the plain loop a float32 kernel would run.
// The float64 arguments hold float32 (or fp16) values exactly.
func dot32(a, b []float64) float32 {
	var s float32
	for i := range a {
		s += float32(a[i]) * float32(b[i])
	}
	return s
}
