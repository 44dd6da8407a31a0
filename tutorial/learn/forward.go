package learn

import (
	"fmt"
	"math"

	"github.com/goflash/goflash/flashattn"
)

// Step is the body of the forward pass's inner loop, the learner's lines:
// query block i (Br rows) meets key block j (Bc rows).
//
//	S        Br x Bc scores tau Q_i K_j^T, -Inf where the causal mask hides a key
//	V        V_j, Bc x d
//	m, l, O  each row's running max (Br), running sum (Br) and unnormalised
//	         output (Br x d), to be updated in place
type Step func(S, V [][]float32, m, l []float32, O [][]float32)

// Finish ends query block i, the learner's lines: normalise each row of O by
// its l, and write its log-sum-exp L = m + log l.
type Finish func(m, l []float32, O [][]float32, L []float32)

// Tiles are FA2's block sizes and the mask of one call.
type Tiles struct {
	Br, Bc int     // rows of a query block, of a key block
	Causal bool    // row i sees key j only if j <= i + Nk - Nq (as flashattn.Options.Causal)
	Scale  float64 // tau; 0 means 1/sqrt(d)
}

// Exp is e^x in float32, for the learner's lines.
func Exp(x float32) float32 { return float32(math.Exp(float64(x))) }

// Log is the natural logarithm in float32 (Log(0) = -Inf).
func Log(x float32) float32 { return float32(math.Log(float64(x))) }

var negInf = float32(math.Inf(-1))

// Forward is FA2's forward pass (Algorithm 1 of the paper) with step and
// finish as the body of its loops. It returns what flashattn.Forward does:
// O (B, Nq, Hq, d) and the log-sum-exp L (B, Hq, Nq). A panic in step or
// finish is returned as an error.
func Forward(q, k, v *flashattn.Tensor, t Tiles, step Step, finish Finish) (res *flashattn.Result, err error) {
	d, tau, err := t.setup(q, k, v)
	if err != nil {
		return nil, err
	}
	defer catch(&err)
	Tr, Tc := ceilDiv(d.Nq, t.Br), ceilDiv(d.Nk, t.Bc)
	out, lse := flashattn.New(d.QShape()), make([]float32, d.LSELen())
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.Hq; h++ {
			for i := 0; i < Tr; i++ { // one query block: a thread block on a GPU
				r0, r1 := i*t.Br, min((i+1)*t.Br, d.Nq)
				Qi := load(q, b, h, r0, r1)
				m, l, O := filled(r1-r0, negInf), make([]float32, r1-r0), matrix(r1-r0, d.D)
				for j := 0; j < Tc; j++ {
					c0, c1 := j*t.Bc, min((j+1)*t.Bc, d.Nk)
					if t.Causal && c0 > lastKey(d, r1-1) {
						break // this tile and all after it lie above the diagonal: skipped, never loaded
					}
					Kj, Vj := load(k, b, d.KVHead(h), c0, c1), load(v, b, d.KVHead(h), c0, c1)
					S := t.scores(d, tau, Qi, Kj, r0, c0) // tau Q_i K_j^T, -Inf where masked
					step(S, Vj, m, l, O)                  // the online softmax: your lines
				}
				L := make([]float32, r1-r0)
				finish(m, l, O, L) // O /= l, L = m + log l: your lines
				if err := store(out, b, h, r0, O, "O"); err != nil {
					return nil, err
				}
				copy(lse[d.LSEIndex(b, h, r0):][:r1-r0], L)
			}
		}
	}
	return &flashattn.Result{Dims: d, Out: out, LSE: lse, Reason: "tutorial/learn.Forward: the learner's step and finish"}, nil
}

// setup checks the inputs and the tiles and returns the problem and tau.
func (t Tiles) setup(q, k, v *flashattn.Tensor) (flashattn.Dims, float32, error) {
	d, err := flashattn.DimsOf(q, k, v)
	if err != nil {
		return d, 0, err
	}
	if t.Br < 1 || t.Bc < 1 {
		return d, 0, fmt.Errorf("learn: tiles Br = %d, Bc = %d: both must be at least 1", t.Br, t.Bc)
	}
	if math.IsNaN(t.Scale) || t.Scale < 0 || t.Scale > math.MaxFloat32 {
		return d, 0, fmt.Errorf("learn: scale %v: want 0 (1/sqrt(d)) or a positive float32", t.Scale)
	}
	tau := t.Scale
	if tau == 0 {
		tau = 1 / math.Sqrt(float64(d.D))
	}
	return d, float32(tau), nil
}

// scores is the tile S_ij = tau Q_i K_j^T of rows r0.. and keys c0.., with
// -Inf where the causal mask hides a key.
func (t Tiles) scores(d flashattn.Dims, tau float32, Qi, Kj [][]float32, r0, c0 int) [][]float32 {
	S := matrix(len(Qi), len(Kj))
	for r, q := range Qi {
		for c, k := range Kj {
			if t.Causal && c0+c > lastKey(d, r0+r) {
				S[r][c] = negInf
				continue
			}
			var s float32
			for x := range q {
				s += q[x] * k[x]
			}
			S[r][c] = tau * s
		}
	}
	return S
}

// lastKey is the last key row i sees under the causal mask (bottom-right
// aligned: negative when it sees none).
func lastKey(d flashattn.Dims, i int) int { return i + d.Nk - d.Nq }

// ceilDiv is ⌈n/b⌉ for n ≥ 0, b ≥ 1, without n + b - 1 (which wraps for
// tiles near MaxInt).
func ceilDiv(n, b int) int {
	if n <= 0 {
		return 0
	}
	return (n-1)/b + 1
}

// load copies rows [r0, r1) of head h of batch b of t (a block: Q_i, K_j, ...).
func load(t *flashattn.Tensor, b, h, r0, r1 int) [][]float32 {
	rows := make([][]float32, r1-r0)
	for r := range rows {
		rows[r] = make([]float32, t.Shape.D)
		for x := range rows[r] {
			rows[r][x] = t.At(b, r0+r, h, x)
		}
	}
	return rows
}

// store writes the block rows into rows r0.. of head h of batch b of t; a
// row of the wrong length (the learner's code replaced it) is an error.
func store(t *flashattn.Tensor, b, h, r0 int, rows [][]float32, name string) error {
	for r, row := range rows {
		if len(row) != t.Shape.D {
			return fmt.Errorf("row %d of %s has %d numbers, want d = %d: update %s[r][x] in place", r, name, len(row), t.Shape.D, name)
		}
		for x, y := range row {
			t.Set(b, r0+r, h, x, y)
		}
	}
	return nil
}

func matrix(rows, cols int) [][]float32 {
	buf := make([]float32, rows*cols)
	m := make([][]float32, rows)
	for r := range m {
		m[r] = buf[r*cols : (r+1)*cols : (r+1)*cols]
	}
	return m
}

func filled(n int, x float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = x
	}
	return s
}

// catch turns a panic of the learner's code into an error.
func catch(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("your code panicked: %v", p)
	}
}
