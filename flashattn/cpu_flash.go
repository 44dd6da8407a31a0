package flashattn

import (
	"context"
	"math"
)

// flashImpl is FlashAttention-2 (Dao, 2023) on the CPU, in the paper's
// notation. Q is cut into Tr = ceil(Nq/Br) blocks of Br rows, K and V into
// Tc = ceil(Nk/Bc) blocks of Bc rows. The forward pass never forms the
// Nq x Nk score matrix: for one Q block it walks the K/V blocks in order and
// keeps, per row, the running max m, the running sum l of exp(s - m) and the
// unnormalised output O. Extra memory per worker is O(Br*Bc + Br*D) (the
// tiles a GPU keeps in SRAM), so the whole pass needs O(N), not O(N^2).
type flashImpl struct{}

// defaultBlock is Br and Bc unless Options.BlockQ/BlockK say otherwise: a
// 64x64 float32 score tile plus the Q, K, V and O tiles (64 x D each) fit in
// a core's L2 cache for D up to 256.
const defaultBlock = 64

// tiling is the FA2 block grid of one problem.
type tiling struct {
	Br, Bc, Tr, Tc int
	mask           scoreMask
}

func tilingOf(p problem, o *Options) tiling {
	d := p.Dims
	t := tiling{Br: defaultBlock, Bc: defaultBlock, mask: p.mask()}
	if o != nil && o.BlockQ > 0 {
		t.Br = o.BlockQ
	}
	if o != nil && o.BlockK > 0 {
		t.Bc = o.BlockK
	}
	t.Tr, t.Tc = ceilDiv(d.Nq, t.Br), ceilDiv(d.Nk, t.Bc)
	return t
}

// ceilDiv is ceil(n/b) for n, b >= 1, without the overflow of (n+b-1)/b
// when b is near MaxInt.
func ceilDiv(n, b int) int { return (n-1)/b + 1 }

// rows and cols are the row ranges of Q block i and K block j; the last block
// of each is ragged when Br (Bc) does not divide Nq (Nk).
func (t tiling) rows(d Dims, i int) (r0, r1 int) { return i * t.Br, min((i+1)*t.Br, d.Nq) }
func (t tiling) cols(d Dims, j int) (c0, c1 int) { return j * t.Bc, min((j+1)*t.Bc, d.Nk) }

// kind classifies tile (rows [r0,r1), keys [c0,c1)). Both ends of a row's
// visible range grow with the row, so the first and last rows decide whether
// any key is visible and whether all are: only tiles on a mask edge (the
// diagonal, a window's edges) need the element mask.
func (t tiling) kind(r0, r1, c0, c1 int) StepKind {
	lo0, hi0 := t.mask.keys(r0)
	lo1, hi1 := t.mask.keys(r1 - 1)
	switch {
	case c0 > hi1 || c1-1 < lo0:
		return StepSkipped // wholly outside the mask: never loaded
	case c1-1 <= hi0 && c0 >= lo1:
		return StepComputed // wholly inside it
	}
	return StepMasked
}

// kStart and kEnd bound the K blocks Q block rows [r0, r1) touch: every
// block before kStart or from kEnd on is skipped, so the loops stop there.
func (t tiling) kStart(r0 int) int {
	lo, _ := t.mask.keys(r0) // first key the block's first row sees
	return min(t.Tc, lo/t.Bc)
}

func (t tiling) kEnd(r1 int) int {
	_, hi := t.mask.keys(r1 - 1) // last key the block's last row sees
	if hi < 0 {
		return 0
	}
	return min(t.Tc, hi/t.Bc+1)
}

// qStart and qEnd bound the Q blocks with a row that sees a key of
// [c0, c1): the backward pass's inner loop skips the others.
func (t tiling) qStart(c0 int) int {
	m := t.mask
	if m.right < 0 || c0-m.off-m.right <= 0 {
		return 0
	}
	return min(t.Tr, (c0-m.off-m.right)/t.Br)
}

func (t tiling) qEnd(c1 int) int {
	m := t.mask
	if m.left < 0 {
		return t.Tr
	}
	last := c1 - 1 - m.off + m.left // last row that sees key c1-1
	if last < 0 {
		return 0
	}
	return min(t.Tr, last/t.Br+1)
}

// fwdScratch is one worker's on-chip memory, in GPU terms.
type fwdScratch struct {
	Qi, Oi []float32 // Br x D: the Q tile and the unnormalised output
	Kj, Vj []float32 // Bc x D
	S      []float32 // Br x Bc: scores, overwritten by P = exp(S - m)
	m, l   []float32 // Br: running max and running sum per row
}

// scratchTiles are Br and Bc as the scratch holds them: never larger than
// the problem.
func (t tiling) scratchTiles(d Dims) (br, bc int) { return min(t.Br, d.Nq), min(t.Bc, d.Nk) }

// fwdScratchLens lists the lengths of fwdScratch's buffers, in field order.
func fwdScratchLens(br, bc, dd int) []int {
	return []int{br * dd, br * dd, bc * dd, bc * dd, br * bc, br, br}
}

// bwdScratchLens lists the lengths of bwdScratch's buffers, in field order.
func bwdScratchLens(br, bc, dd int) []int {
	return []int{br * dd, br * dd, br * dd, bc * dd, bc * dd, bc * dd, bc * dd, br * bc, br * bc, br, br}
}

// hostBytes is what a call allocates beyond its outputs: one scratch per
// goroutine of each pass, Di for the backward, the trace's steps.
func (flashImpl) hostBytes(p problem, o *Options, backward bool) float64 {
	d, t, w := p.Dims, tilingOf(p, o), workers(o)
	br, bc := t.scratchTiles(d)
	fwdJobs, kvJobs := d.B*d.Hq*t.Tr, d.B*d.Hkv*t.Tc
	if !backward {
		n := float64(min(w, fwdJobs)) * floats(fwdScratchLens(br, bc, d.D)...)
		if o != nil && o.Trace != nil {
			n += traceBytes(t.Tr, t.Tc)
		}
		return n
	}
	per := floats(bwdScratchLens(br, bc, d.D)...)
	return floats(d.LSELen()) + float64(min(w, d.B*d.Hq))*floats(2*d.D) +
		float64(min(w, kvJobs))*per + float64(min(w, fwdJobs))*per
}

func (flashImpl) forward(ctx context.Context, p problem, q, k, v *Tensor, o *Options, out *Tensor, lse []float32) error {
	d, t := p.Dims, tilingOf(p, o)
	var tr *Trace
	if o != nil && o.Trace != nil {
		tr = o.Trace
		if err := tr.start(t.Br, t.Bc, t.Tr, t.Tc); err != nil {
			return err
		}
		defer tr.done()
	}
	br, bc := t.scratchTiles(d)
	newScratch := func() *fwdScratch {
		b := slab(fwdScratchLens(br, bc, d.D)...)
		return &fwdScratch{Qi: b[0], Oi: b[1], Kj: b[2], Vj: b[3], S: b[4], m: b[5], l: b[6]}
	}
	sc := float32(p.Scale)
	negInf := float32(math.Inf(-1))
	// One job per (batch, head, Q block): FA2's parallelisation of the forward
	// pass (a thread block per Q block on the GPU). Jobs write disjoint rows.
	parallelFor(ctx, d.B*d.Hq*t.Tr, workers(o), newScratch, func(s *fwdScratch, job int) {
		b, h, i := job/(d.Hq*t.Tr), job/t.Tr%d.Hq, job%t.Tr
		kh := d.KVHead(h)
		r0, r1 := t.rows(d, i)
		nr := r1 - r0
		traced := tr != nil && b == tr.Batch && h == tr.Head
		tRow := -1 // the traced row's index inside this block
		if traced && tr.Row >= r0 && tr.Row < r1 {
			tRow = tr.Row - r0
		}
		for r := 0; r < nr; r++ {
			q.rowInto(s.Qi[r*d.D:(r+1)*d.D], b, r0+r, h)
			s.m[r], s.l[r] = negInf, 0
		}
		clear(s.Oi[:nr*d.D])
		kStart, kEnd, order := t.kStart(r0), t.kEnd(r1), 0
		for j := 0; j < t.Tc; j++ {
			if isDone(ctx) {
				return // a whole row of blocks can take seconds
			}
			c0, c1 := t.cols(d, j)
			kind := t.kind(r0, r1, c0, c1)
			if traced {
				ord := -1
				if kind != StepSkipped {
					ord, order = order, order+1
				}
				tr.step(TraceStep{QBlock: i, KBlock: j, Kind: kind, Order: ord})
			}
			if j < kStart || j >= kEnd {
				continue // wholly outside the mask: K_j and V_j are never loaded
			}
			nc := c1 - c0
			// Load K_j and V_j (on a GPU: from HBM into shared memory).
			for c := 0; c < nc; c++ {
				k.rowInto(s.Kj[c*d.D:(c+1)*d.D], b, c0+c, kh)
				v.rowInto(s.Vj[c*d.D:(c+1)*d.D], b, c0+c, kh)
			}
			every := pollRows(nc, d.D)
			for r := 0; r < nr; r++ {
				if polled(ctx, r, every) {
					return // one tile as large as the problem takes seconds
				}
				qr, Sr := s.Qi[r*d.D:(r+1)*d.D], s.S[r*bc:r*bc+nc]
				// S_ij = scale * Q_i K_j^T for this row, capped and biased; the
				// mask is applied element by element only on tiles at its edges.
				rowMax := negInf
				for c := range Sr {
					if kind == StepMasked && !t.mask.visible(r0+r, c0+c) {
						Sr[c] = negInf
						continue
					}
					Sr[c], _ = t.mask.score(h, r0+r, c0+c, sc*dot(qr, s.Kj[c*d.D:(c+1)*d.D]))
					rowMax = max(rowMax, Sr[c])
				}
				mOld := s.m[r]
				mNew := max(mOld, rowMax)
				rescale := float32(1)
				if mNew != negInf { // else the row has seen no key yet: nothing to add
					// The old sum and output were relative to mOld: rescale them
					// by exp(m_old - m_new) (0 on the first visible block).
					rescale = exp32(mOld - mNew)
					var rowSum float32
					for c, x := range Sr {
						Sr[c] = exp32(x - mNew) // P~_ij = exp(S_ij - m_new)
						rowSum += Sr[c]
					}
					s.l[r] = rescale*s.l[r] + rowSum
					or := s.Oi[r*d.D : (r+1)*d.D]
					if rescale != 1 {
						for x := range or {
							or[x] *= rescale
						}
					}
					for c, p := range Sr { // O_i += P~_ij V_j
						if p != 0 {
							axpy(p, s.Vj[c*d.D:(c+1)*d.D], or)
						}
					}
					s.m[r] = mNew
				}
				if r == tRow {
					tr.row(RowStep{KBlock: j, M: float64(s.m[r]), L: float64(s.l[r]), Rescale: float64(rescale)})
				}
			}
		}
		// Normalise once at the end (FA2 defers the division by l out of the
		// inner loop) and keep one number per row for the backward pass:
		// LSE = m + log(l). Only a row the mask hides every key from has
		// output 0 and LSE -Inf; in any other row non-finite scores (NaN
		// inputs, or scale*q.k beyond float32) give NaN, never that -Inf.
		for r := 0; r < nr; r++ {
			or := s.Oi[r*d.D : (r+1)*d.D]
			L := negInf
			if t.mask.seesAny(r0 + r) {
				if s.m[r] == negInf { // every visible score was -Inf: no softmax exists
					s.l[r] = float32(math.NaN())
				}
				inv := 1 / s.l[r]
				for x := range or {
					or[x] *= inv
				}
				L = s.m[r] + log32(s.l[r])
			}
			out.setRow(b, r0+r, h, or)
			lse[d.LSEIndex(b, h, r0+r)] = L
			if r == tRow {
				tr.final(float64(s.m[r]), float64(s.l[r]))
			}
		}
	})
	if tr != nil {
		tr.sortSteps()
	}
	markNonFinite(ctx, p, q, k, v, out, lse, workers(o))
	return stopped(ctx)
}

// bwdScratch holds one worker's tiles for the backward pass.
type bwdScratch struct {
	Qi, dOi, dQi     []float32 // Br x D
	Kj, Vj, dKj, dVj []float32 // Bc x D
	P, dS            []float32 // Br x Bc: P, and dS = P * (dP - Di)
	L, Di            []float32 // Br: LSE and Di = rowsum(dO * O) of the Q block
}

// backward recomputes P = exp(S - LSE) tile by tile instead of storing it
// (FA2's trade of FLOPs for memory) and forms, per tile,
//
//	dV_j += P^T dO_i     dP = dO_i V_j^T     dS = P * (dP - Di_i)
//	dK_j += scale * dS^T Q_i                 dQ_i += scale * dS K_j
//
// FA2 runs the K/V blocks in parallel (outer loop) and the Q blocks inside,
// adding dQ with atomics. Atomics make float sums order-dependent, so here
// the work is split in two deterministic passes instead: one job per
// (batch, kv head, K block) owns dK_j and dV_j and sums over its whole GQA
// group; one job per (batch, head, Q block) owns dQ_i. The second pass
// recomputes S and dP (7 tile products instead of FA2's 5).
func (flashImpl) backward(ctx context.Context, p problem, q, k, v, out, dOut *Tensor, lse []float32, o *Options, dq, dk, dv *Tensor) error {
	d, t, w := p.Dims, tilingOf(p, o), workers(o)
	br, bc := t.scratchTiles(d)
	newScratch := func() *bwdScratch {
		b := slab(bwdScratchLens(br, bc, d.D)...)
		return &bwdScratch{Qi: b[0], dOi: b[1], dQi: b[2], Kj: b[3], Vj: b[4], dKj: b[5], dVj: b[6], P: b[7], dS: b[8], L: b[9], Di: b[10]}
	}
	sc := float32(p.Scale)

	// Preprocessing: Di = rowsum(dO * O), one float per row like the LSE.
	Di := make([]float32, d.LSELen())
	parallelFor(ctx, d.B*d.Hq, w, func() []float32 { return make([]float32, 2*d.D) }, func(buf []float32, bh int) {
		b, h := bh/d.Hq, bh%d.Hq
		every := pollRows(1, 2*d.D)
		for i := 0; i < d.Nq; i++ {
			if polled(ctx, i, every) {
				return // Nq rows of one head: long for a long sequence
			}
			out.rowInto(buf[:d.D], b, i, h)
			dOut.rowInto(buf[d.D:], b, i, h)
			Di[d.LSEIndex(b, h, i)] = dot(buf[:d.D], buf[d.D:])
		}
	})

	// loadQ loads Q block i of head h (Q, dO, LSE and Di of its rows).
	loadQ := func(s *bwdScratch, b, h, i int) (r0, r1 int) {
		r0, r1 = t.rows(d, i)
		for r := 0; r < r1-r0; r++ {
			q.rowInto(s.Qi[r*d.D:(r+1)*d.D], b, r0+r, h)
			dOut.rowInto(s.dOi[r*d.D:(r+1)*d.D], b, r0+r, h)
			s.L[r], s.Di[r] = lse[d.LSEIndex(b, h, r0+r)], Di[d.LSEIndex(b, h, r0+r)]
		}
		return r0, r1
	}
	loadKV := func(s *bwdScratch, b, kh, j int) (c0, c1 int) {
		c0, c1 = t.cols(d, j)
		for c := 0; c < c1-c0; c++ {
			k.rowInto(s.Kj[c*d.D:(c+1)*d.D], b, c0+c, kh)
			v.rowInto(s.Vj[c*d.D:(c+1)*d.D], b, c0+c, kh)
		}
		return c0, c1
	}
	// tile recomputes P and dS = P * (dP - Di) of the tile for query head h,
	// dP = dO_i V_j^T being formed one element at a time; dS is taken on to
	// the gradient of scale*Q_i K_j^T (softcap's derivative).
	// It reports false, leaving the tile unfinished, once ctx is done.
	tile := func(s *bwdScratch, h, r0, r1, c0, c1 int) bool {
		kind := t.kind(r0, r1, c0, c1)
		nc := c1 - c0
		every := pollRows(nc, 2*d.D)
		for r := 0; r < r1-r0; r++ {
			if polled(ctx, r, every) {
				return false // one tile as large as the problem takes seconds
			}
			qr, dor := s.Qi[r*d.D:(r+1)*d.D], s.dOi[r*d.D:(r+1)*d.D]
			P, dS := s.P[r*bc:r*bc+nc], s.dS[r*bc:r*bc+nc]
			for c := range P {
				// LSE -Inf: the row saw no key in the forward pass, P = 0.
				if kind == StepMasked && !t.mask.visible(r0+r, c0+c) || s.L[r] == float32(math.Inf(-1)) {
					P[c], dS[c] = 0, 0
					continue
				}
				x, dx := t.mask.score(h, r0+r, c0+c, sc*dot(qr, s.Kj[c*d.D:(c+1)*d.D]))
				P[c] = exp32(x - s.L[r])
				dS[c] = P[c] * (dot(dor, s.Vj[c*d.D:(c+1)*d.D]) - s.Di[r]) * dx
			}
		}
		return true
	}

	// Pass 1: dK_j and dV_j; outer loop over K/V blocks, inner over Q blocks.
	parallelFor(ctx, d.B*d.Hkv*t.Tc, w, newScratch, func(s *bwdScratch, job int) {
		b, kh, j := job/(d.Hkv*t.Tc), job/t.Tc%d.Hkv, job%t.Tc
		c0, c1 := loadKV(s, b, kh, j)
		nc := c1 - c0
		clear(s.dKj[:nc*d.D])
		clear(s.dVj[:nc*d.D])
		for h := kh * d.Groups(); h < (kh+1)*d.Groups(); h++ {
			for i := t.qStart(c0); i < t.qEnd(c1); i++ {
				if isDone(ctx) {
					return // a whole row of blocks can take seconds
				}
				r0, r1 := loadQ(s, b, h, i)
				if !tile(s, h, r0, r1, c0, c1) {
					return
				}
				every := pollRows(nc, 2*d.D)
				for r := 0; r < r1-r0; r++ {
					if polled(ctx, r, every) {
						return
					}
					qr, dor := s.Qi[r*d.D:(r+1)*d.D], s.dOi[r*d.D:(r+1)*d.D]
					for c := 0; c < nc; c++ {
						if p := s.P[r*bc+c]; p != 0 {
							axpy(p, dor, s.dVj[c*d.D:(c+1)*d.D]) // dV_j += P^T dO_i
						}
						if ds := s.dS[r*bc+c]; ds != 0 {
							axpy(ds, qr, s.dKj[c*d.D:(c+1)*d.D]) // dK_j += dS^T Q_i
						}
					}
				}
			}
		}
		for c := 0; c < nc; c++ {
			dKc := s.dKj[c*d.D : (c+1)*d.D]
			for x := range dKc {
				dKc[x] *= sc
			}
			dk.setRow(b, c0+c, kh, dKc)
			dv.setRow(b, c0+c, kh, s.dVj[c*d.D:(c+1)*d.D])
		}
	})

	// Pass 2: dQ_i; outer loop over Q blocks, inner over the K/V blocks they see.
	parallelFor(ctx, d.B*d.Hq*t.Tr, w, newScratch, func(s *bwdScratch, job int) {
		b, h, i := job/(d.Hq*t.Tr), job/t.Tr%d.Hq, job%t.Tr
		r0, r1 := loadQ(s, b, h, i)
		nr := r1 - r0
		clear(s.dQi[:nr*d.D])
		for j := t.kStart(r0); j < t.kEnd(r1); j++ {
			if isDone(ctx) {
				return // a whole row of blocks can take seconds
			}
			c0, c1 := loadKV(s, b, d.KVHead(h), j)
			if !tile(s, h, r0, r1, c0, c1) {
				return
			}
			every := pollRows(c1-c0, d.D)
			for r := 0; r < nr; r++ {
				if polled(ctx, r, every) {
					return
				}
				dqr := s.dQi[r*d.D : (r+1)*d.D]
				for c := 0; c < c1-c0; c++ {
					if ds := s.dS[r*bc+c]; ds != 0 {
						axpy(ds, s.Kj[c*d.D:(c+1)*d.D], dqr) // dQ_i += dS K_j
					}
				}
			}
		}
		for r := 0; r < nr; r++ {
			dqr := s.dQi[r*d.D : (r+1)*d.D]
			for x := range dqr {
				dqr[x] *= sc
			}
			dq.setRow(b, r0+r, h, dqr)
		}
	})
	return stopped(ctx)
}
