package learn

import (
	"fmt"
	"math"
	"strings"
)

// The one-tile checks: the learner's functions run on small tiles whose
// answers are computed here in float64, one quantity (one line of the
// algorithm) at a time, so that the first thing wrong gets a hint that names
// its line. Each check starts from the exact state, so a wrong line does not
// hide behind an earlier one.

var inf = math.Inf(1)

// The forward probe: a query block of 4 rows against two key blocks of 3
// keys, d = 2. Row 3 sees no key in the first block (all -Inf) and its first
// keys in the second; row 0's max grows in the second block, rows 1 and 2
// keep theirs.
var (
	probeS1 = [][]float64{{1, 2, 0.5}, {0, -1, 0.25}, {-inf, 3, 1}, {-inf, -inf, -inf}}
	probeV1 = [][]float64{{1, 2}, {3, -1}, {-2, 0.5}}
	probeS2 = [][]float64{{4, 0, -1}, {-3, 0, -2}, {1, -inf, 2}, {0.5, 1.5, -inf}}
	probeV2 = [][]float64{{0.5, -1}, {2, 1}, {1, 1}}
)

// state is the running state of a query block's rows, in float64.
type state struct {
	m, l []float64
	O    [][]float64
}

func fresh(rows, d int) state {
	s := state{m: make([]float64, rows), l: make([]float64, rows), O: make([][]float64, rows)}
	for r := range s.m {
		s.m[r], s.O[r] = -inf, make([]float64, d)
	}
	return s
}

// variant is one way of computing a block's update: right, or one of the
// usual slips, so that a wrong answer can be named.
type variant struct {
	maxWithOld bool // mNew = max(m, rowmax(S)), not rowmax(S) alone
	rescale    int  // +1: exp(m - mNew) (right); 0: none; -1: exp(mNew - m)
	keep       bool // add to the old l and O (not overwrite them)
	subtract   bool // P = exp(S - mNew), not exp(S)
}

var right = variant{maxWithOld: true, rescale: 1, keep: true, subtract: true}

// update is one row's step under variant v, in float64.
func (v variant) update(m, l float64, o []float64, S []float64, V [][]float64) (float64, float64, []float64) {
	mNew := math.Inf(-1)
	for _, s := range S {
		mNew = math.Max(mNew, s)
	}
	if v.maxWithOld {
		mNew = math.Max(m, mNew)
	}
	out := make([]float64, len(o))
	if math.IsInf(mNew, -1) {
		copy(out, o)
		return m, l, out // the row has seen no key yet
	}
	alpha := 1.0
	switch v.rescale {
	case 1:
		alpha = math.Exp(m - mNew)
	case -1:
		alpha = math.Exp(mNew - m)
	}
	if !v.keep {
		l, alpha = 0, 0
	}
	l *= alpha
	for x := range o {
		out[x] = alpha * o[x]
	}
	for c, s := range S {
		if !v.subtract {
			s += mNew
		}
		p := math.Exp(s - mNew)
		if math.IsInf(s, -1) {
			p = 0
		}
		l += p
		for x := range out {
			out[x] += p * V[c][x]
		}
	}
	return mNew, l, out
}

func (v variant) step(st state, S, V [][]float64) state {
	n := fresh(len(S), len(V[0]))
	for r := range S {
		n.m[r], n.l[r], n.O[r] = v.update(st.m[r], st.l[r], st.O[r], S[r], V)
	}
	return n
}

// near reports whether got is want up to float32 rounding (both -Inf counts).
func near(got float32, want float64) bool {
	g := float64(got)
	if math.IsInf(want, 0) || math.IsNaN(want) {
		return g == want
	}
	return math.Abs(g-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func nearRow(got []float32, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for x := range want {
		if !near(got[x], want[x]) {
			return false
		}
	}
	return true
}

func isNaN(x float32) bool { return x != x }

func anyNaN(xs []float32) bool {
	for _, x := range xs {
		if isNaN(x) {
			return true
		}
	}
	return false
}

func f32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

func f32s(xs [][]float64) [][]float32 {
	out := make([][]float32, len(xs))
	for i, x := range xs {
		out[i] = f32(x)
	}
	return out
}

func fmtRow(xs []float32) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.4g", x)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func fmtRow64(xs []float64) string { return fmtRow(f32(xs)) }

// call runs f, turning a panic into a hint.
func call(what string, f func()) (hint string) {
	defer func() {
		if p := recover(); p != nil {
			hint = fmt.Sprintf("your %s panicked: %v", what, p)
		}
	}()
	f()
	return ""
}

// probeForward runs step on the two key blocks and finish on the result,
// and returns a hint for the first wrong line ("" when all are right).
func probeForward(step Step, finish Finish) string {
	st := fresh(4, 2)
	for blk, tile := range []struct{ S, V [][]float64 }{{probeS1, probeV1}, {probeS2, probeV2}} {
		m, l, O := f32(st.m), f32(st.l), f32s(st.O)
		if h := call("step", func() { step(f32s(tile.S), f32s(tile.V), m, l, O) }); h != "" {
			return h
		}
		if h := stepHint(blk, st, tile.S, tile.V, m, l, O); h != "" {
			return h
		}
		st = right.step(st, tile.S, tile.V)
	}
	return finishHint(finish)
}

// stepHint compares one step's result with the right one and names the first
// wrong quantity, in the order of the algorithm's lines.
func stepHint(blk int, st state, S, V [][]float64, m, l []float32, O [][]float32) string {
	want := right.step(st, S, V)
	when := "its first key block"
	if blk == 1 {
		when = "its second key block"
	}
	// A row that sees no key in this block and none before: nothing may change.
	for r := range S {
		if !math.IsInf(want.m[r], -1) {
			continue
		}
		if isNaN(m[r]) || isNaN(l[r]) || anyNaN(O[r]) || !math.IsInf(float64(m[r]), -1) || l[r] != 0 || !nearRow(O[r], want.O[r]) {
			return fmt.Sprintf("row %d sees no key yet (all its scores are -Inf), but its m, l, O became %g, %g, %v: "+
				"its mNew is -Inf, and exp(S - mNew) = exp(-Inf - (-Inf)) is NaN; skip a row while its mNew is -Inf, so that m, l and O stay -Inf, 0 and 0",
				r, m[r], l[r], fmtRow(O[r]))
		}
	}
	// m: the running max.
	for r := range S {
		if near(m[r], want.m[r]) {
			continue
		}
		blockMax := math.Inf(-1)
		for _, s := range S[r] {
			blockMax = math.Max(blockMax, s)
		}
		switch {
		case math.IsInf(float64(m[r]), -1) || near(m[r], st.m[r]) && st.m[r] != want.m[r]:
			return fmt.Sprintf("row %d's m is %g after %s, whose largest score in that row is %g: compute mNew = max(m[r], rowmax(S[r])) and keep it, m[r] = mNew",
				r, m[r], when, blockMax)
		case near(m[r], blockMax):
			return fmt.Sprintf("row %d's m is %g, the largest score of this block, but its running max was already %g: mNew = max(m[r], rowmax(S[r])), the old max included",
				r, m[r], st.m[r])
		}
		return fmt.Sprintf("row %d's m is %g after %s, want mNew = max(m[r], rowmax(S[r])) = %g", r, m[r], when, want.m[r])
	}
	// l: the running sum.
	for r := range S {
		if near(l[r], want.l[r]) {
			continue
		}
		named := func(v variant) bool {
			_, lv, _ := v.update(st.m[r], st.l[r], st.O[r], S[r], V)
			return near(l[r], lv)
		}
		grows := want.m[r] > st.m[r] && !math.IsInf(st.m[r], -1)
		switch {
		case isNaN(l[r]) && blk == 0:
			return fmt.Sprintf("row %d's l is NaN after its first key block: there m is -Inf, so the rescale factor exp(m[r] - mNew) is exp(-Inf) = 0 "+
				"(exp(mNew - m[r]) would be +Inf, and +Inf x 0 is NaN)", r)
		case isNaN(l[r]):
			return fmt.Sprintf("row %d's l is NaN after %s: the rescale factor is exp(m[r] - mNew) and P = exp(S[r][c] - mNew), both at most 1", r, when)
		case l[r] == 0:
			return fmt.Sprintf("row %d's l is 0: did you add rowsum(P) to l? (P[c] = exp(S[r][c] - mNew); l[r] += the sum of P over the block's keys)", r)
		case grows && named(variant{maxWithOld: true, rescale: 0, keep: true, subtract: true}):
			return fmt.Sprintf("row %d's l was not rescaled: its max grows from %g to %g in %s, so multiply the old l by exp(m[r] - mNew) = exp(%g - %g) before adding rowsum(P)",
				r, st.m[r], want.m[r], when, st.m[r], want.m[r])
		case grows && named(variant{maxWithOld: true, rescale: -1, keep: true, subtract: true}):
			return fmt.Sprintf("row %d's l was rescaled by exp(mNew - m[r]); the factor is exp(m[r] - mNew), old minus new, at most 1", r)
		case blk == 1 && named(variant{maxWithOld: true, rescale: 1, keep: false, subtract: true}):
			return fmt.Sprintf("row %d's l lost the earlier key blocks: l[r] = exp(m[r] - mNew) l[r] + rowsum(P), not l[r] = rowsum(P)", r)
		case named(variant{maxWithOld: true, rescale: 1, keep: true, subtract: false}):
			return fmt.Sprintf("row %d's l is %.4g, a sum of exp(S[r][c]): P is exp(S[r][c] - mNew), with the running max subtracted", r, l[r])
		}
		return fmt.Sprintf("row %d's l is %.4g after %s, want exp(m[r] - mNew) l[r] + rowsum(exp(S[r] - mNew)) = %.4g", r, l[r], when, want.l[r])
	}
	// O: the unnormalised output.
	for r := range S {
		if nearRow(O[r], want.O[r]) {
			continue
		}
		named := func(v variant) bool {
			_, _, ov := v.update(st.m[r], st.l[r], st.O[r], S[r], V)
			return nearRow(O[r], ov)
		}
		zero, nan := true, anyNaN(O[r])
		for _, x := range O[r] {
			zero = zero && x == 0
		}
		scaled := make([]float64, len(want.O[r])) // the right O already divided by l
		for x := range scaled {
			scaled[x] = want.O[r][x] / want.l[r]
		}
		grows := want.m[r] > st.m[r] && !math.IsInf(st.m[r], -1)
		switch {
		case len(O[r]) != len(want.O[r]):
			return fmt.Sprintf("row %d of O has %d numbers, want d = %d: update O[r][x] in place", r, len(O[r]), len(want.O[r]))
		case nan:
			return fmt.Sprintf("row %d's O has a NaN after %s: O[r] is rescaled by exp(m[r] - mNew) (0 on a row's first block) and gets P[c] V[c] added, P[c] = exp(S[r][c] - mNew)", r, when)
		case zero:
			return fmt.Sprintf("row %d's O is 0: did you add P V to O? (O[r][x] += P[c] * V[c][x] for every key c of the block)", r)
		case nearRow(O[r], scaled):
			return fmt.Sprintf("row %d's O is already divided by l: keep O unnormalised in the loop; finish divides it once, at the end", r)
		case grows && named(variant{maxWithOld: true, rescale: 0, keep: true, subtract: true}):
			return fmt.Sprintf("row %d's O was not rescaled: its max grows from %g to %g in %s, so multiply the old O[r] by exp(m[r] - mNew), as l, before adding P V",
				r, st.m[r], want.m[r], when)
		case grows && named(variant{maxWithOld: true, rescale: -1, keep: true, subtract: true}):
			return fmt.Sprintf("row %d's O was rescaled by exp(mNew - m[r]); the factor is exp(m[r] - mNew), old minus new", r)
		case blk == 1 && named(variant{maxWithOld: true, rescale: 1, keep: false, subtract: true}):
			return fmt.Sprintf("row %d's O lost the earlier key blocks: O[r] = exp(m[r] - mNew) O[r] + P V, not O[r] = P V", r)
		case named(variant{maxWithOld: true, rescale: 1, keep: true, subtract: false}):
			return fmt.Sprintf("row %d's O adds exp(S[r][c]) V[c]: P is exp(S[r][c] - mNew), with the running max subtracted", r)
		}
		return fmt.Sprintf("row %d's O is %s after %s, want exp(m[r] - mNew) O[r] + P V = %s", r, fmtRow(O[r]), when, fmtRow64(want.O[r]))
	}
	return ""
}

// finishHint runs finish on a state that ends two visible rows and one that
// saw no key, and names the first wrong quantity.
func finishHint(finish Finish) string {
	m := []float64{2, 0.25, -inf}
	l := []float64{1.75, 2.5, 0}
	O := [][]float64{{3.5, -1.75}, {0.5, 2.5}, {0, 0}}
	m32, l32, O32, L := f32(m), f32(l), f32s(O), make([]float32, 3)
	if h := call("finish", func() { finish(m32, l32, O32, L) }); h != "" {
		return h
	}
	for r := range O {
		want := make([]float64, len(O[r]))
		for x := range want {
			if l[r] > 0 {
				want[x] = O[r][x] / l[r]
			}
		}
		if nearRow(O32[r], want) {
			continue
		}
		times := make([]float64, len(O[r]))
		for x := range times {
			times[x] = O[r][x] * l[r]
		}
		switch {
		case l[r] == 0:
			return fmt.Sprintf("row %d saw no key: its l is 0 and O/l = 0/0 is NaN, so leave its O at 0 (divide only where l > 0); L = m + log l is then -Inf by itself", r)
		case nearRow(O32[r], O[r]):
			return fmt.Sprintf("row %d's output is not divided by its l: at the end O[r][x] /= l[r]", r)
		case nearRow(O32[r], times):
			return fmt.Sprintf("row %d's output is multiplied by l: divide by it, O[r][x] /= l[r]", r)
		}
		return fmt.Sprintf("row %d's output is %s, want O[r] / l[r] = %s", r, fmtRow(O32[r]), fmtRow64(want))
	}
	for r := range O {
		want := m[r] + math.Log(l[r])
		if near(L[r], want) {
			continue
		}
		switch {
		case math.IsInf(want, -1):
			return fmt.Sprintf("row %d saw no key (m = -Inf, l = 0): its L must be -Inf, which m + log(l) gives, but it is %g", r, L[r])
		case L[r] == 0:
			return fmt.Sprintf("row %d's L is 0: set L[r] = m[r] + log(l[r]), the row's log-sum-exp, which the backward pass needs", r)
		case near(L[r], math.Log(l[r])):
			return fmt.Sprintf("row %d's L is log(l) = %g: l was summed relative to the max, so L = m + log(l) = %g", r, L[r], want)
		case near(L[r], m[r]):
			return fmt.Sprintf("row %d's L is its m: L = m + log(l)", r)
		}
		return fmt.Sprintf("row %d's L is %g, want m + log(l) = %g", r, L[r], want)
	}
	return ""
}

// The backward probe: one tile of 3 query rows and 2 keys, d = 2, tau = 0.5.
var (
	probeP  = [][]float64{{0.5, 0.25}, {0.125, 0.75}, {1, 0}}
	probeDP = [][]float64{{1, -2}, {0.5, 3}, {-1, 2}}
	probeD  = []float64{0.25, -0.5, 1.5}
	probeQ  = [][]float64{{1, 2}, {-1, 0.5}, {2, -3}}
	probeK  = [][]float64{{0.5, -1}, {2, 1}}
	probeDO = [][]float64{{1, -1}, {0.5, 2}, {-2, 1}}
)

const probeTau = 0.5

// grads is one tile's contribution to dQ_i, dK_j and dV_j, with dS computed
// by ds and scaled by tau (or not).
func grads(ds func(r, c int) float64, tau float64) (dQ, dK, dV [][]float64) {
	dQ, dK, dV = zeros(len(probeP), 2), zeros(len(probeK), 2), zeros(len(probeK), 2)
	for r := range probeP {
		for c := range probeK {
			for x := 0; x < 2; x++ {
				dV[c][x] += probeP[r][c] * probeDO[r][x]
				dK[c][x] += tau * ds(r, c) * probeQ[r][x]
				dQ[r][x] += tau * ds(r, c) * probeK[c][x]
			}
		}
	}
	return dQ, dK, dV
}

func zeros(rows, cols int) [][]float64 {
	z := make([][]float64, rows)
	for r := range z {
		z[r] = make([]float64, cols)
	}
	return z
}

func nearMat(got [][]float32, want [][]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for r := range want {
		if !nearRow(got[r], want[r]) {
			return false
		}
	}
	return true
}

func isZero(m [][]float32) bool {
	for _, row := range m {
		for _, x := range row {
			if x != 0 {
				return false
			}
		}
	}
	return true
}

// firstDiff names the first element of got that is not want's.
func firstDiff(got [][]float32, want [][]float64, ri string) string {
	for r := range want {
		for x := range want[r] {
			if r >= len(got) || x >= len(got[r]) {
				return fmt.Sprintf("[%s=%d] is missing (the block has %d rows of %d numbers)", ri, r, len(want), len(want[r]))
			}
			if !near(got[r][x], want[r][x]) {
				return fmt.Sprintf("[%s=%d][x=%d] is %g, want %.6g", ri, r, x, got[r][x], want[r][x])
			}
		}
	}
	return ""
}

// probeBackward runs step on the probe tile twice (the second time into
// accumulators that already hold something) and names the first wrong line.
func probeBackward(step BwdStep) string {
	dsRight := func(r, c int) float64 { return probeP[r][c] * (probeDP[r][c] - probeD[r]) }
	wantQ, wantK, wantV := grads(dsRight, probeTau)
	run := func(dQ, dK, dV [][]float32) string {
		return call("step", func() {
			step(f32s(probeP), f32s(probeDP), f32(probeD), f32s(probeQ), f32s(probeK), f32s(probeDO), probeTau, dQ, dK, dV)
		})
	}
	dQ, dK, dV := f32s(zeros(3, 2)), f32s(zeros(2, 2)), f32s(zeros(2, 2))
	if h := run(dQ, dK, dV); h != "" {
		return h
	}
	// dV_j += P^T dO_i: needs no dS.
	if !nearMat(dV, wantV) {
		if isZero(dV) {
			return "dV is 0: did you add P^T dO to it? (dV[c][x] += P[r][c] * dO[r][x] for every row r and key c)"
		}
		return "dV" + firstDiff(dV, wantV, "c") + ": dV_j += P^T dO_i, that is dV[c][x] += P[r][c] * dO[r][x]"
	}
	// dS = P ∘ (dP - D_i), seen through dK and dQ.
	slips := []struct {
		ds   func(r, c int) float64
		tau  float64
		hint string
	}{
		{dsRight, 1, "%s misses the scale tau: S = tau Q K^T, so dK_j += tau dS^T Q_i and dQ_i += tau dS K_j"},
		{func(r, c int) float64 { return probeP[r][c] * probeDP[r][c] }, probeTau, "%s is off because dS misses D: dS = P ∘ (dP - D_i), with D_i = rowsum(dO_i ∘ O_i) given as D[r] for row r"},
		{func(r, c int) float64 { return probeDP[r][c] - probeD[r] }, probeTau, "%s is off because dS misses the factor P: dS = P ∘ (dP - D_i), elementwise, dS[r][c] = P[r][c] * (dP[r][c] - D[r])"},
		{func(r, c int) float64 { return probeP[r][c] * (probeD[r] - probeDP[r][c]) }, probeTau, "%s has the wrong sign: dS = P ∘ (dP - D_i), not P ∘ (D_i - dP)"},
		{func(r, c int) float64 { return probeP[r][c] * (probeDP[r][c] - probeD[c]) }, probeTau, "%s takes D by key: D_i is one number per query row, dS[r][c] = P[r][c] * (dP[r][c] - D[r])"},
	}
	for _, g := range []struct {
		name string
		got  [][]float32
		want [][]float64
		pick func(dQ, dK [][]float64) [][]float64
		line string
		idx  string
	}{
		{"dK", dK, wantK, func(_, dK [][]float64) [][]float64 { return dK }, "dK_j += tau dS^T Q_i, that is dK[c][x] += tau * dS[r][c] * Q[r][x]", "c"},
		{"dQ", dQ, wantQ, func(dQ, _ [][]float64) [][]float64 { return dQ }, "dQ_i += tau dS K_j, that is dQ[r][x] += tau * dS[r][c] * K[c][x]", "r"},
	} {
		if nearMat(g.got, g.want) {
			continue
		}
		if isZero(g.got) {
			return fmt.Sprintf("%s is 0: did you add to it? %s, with dS[r][c] = P[r][c] * (dP[r][c] - D[r])", g.name, g.line)
		}
		for _, s := range slips {
			q, k, _ := grads(s.ds, s.tau)
			if nearMat(g.got, g.pick(q, k)) {
				return fmt.Sprintf(s.hint, g.name)
			}
		}
		return g.name + firstDiff(g.got, g.want, g.idx) + ": " + g.line + ", with dS[r][c] = P[r][c] * (dP[r][c] - D[r])"
	}
	// A second tile adds to what the accumulators hold.
	start := [][][]float64{{{1, -1}, {2, 0.5}, {-1, 3}}, {{0.5, 1}, {-2, 1}}, {{1, 2}, {3, -0.5}}}
	dQ, dK, dV = f32s(start[0]), f32s(start[1]), f32s(start[2])
	if h := run(dQ, dK, dV); h != "" {
		return h
	}
	for _, g := range []struct {
		name        string
		got         [][]float32
		start, adds [][]float64
	}{{"dV", dV, start[2], wantV}, {"dK", dK, start[1], wantK}, {"dQ", dQ, start[0], wantQ}} {
		sum := zeros(len(g.start), 2)
		for r := range sum {
			for x := range sum[r] {
				sum[r][x] = g.start[r][x] + g.adds[r][x]
			}
		}
		if nearMat(g.got, sum) {
			continue
		}
		if nearMat(g.got, g.adds) {
			return fmt.Sprintf("%s was overwritten, not added to: every tile adds its part (+=), as %s collects the contributions of all the tiles it meets", g.name, g.name)
		}
		return fmt.Sprintf("%s%s after a second tile: each tile adds its part to what the first left", g.name, firstDiff(g.got, sum, "row"))
	}
	return ""
}
