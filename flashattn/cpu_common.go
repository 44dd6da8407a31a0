package flashattn

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// The helpers of both CPU backends (cpu_naive.go, cpu_flash.go).

// scoreMask says which keys a query row may see and what the softmax sees
// of their scores: the one mask rule of both CPU backends. Key j is visible
// to row i iff i+off-left <= j <= i+off+right, off = Nk - Nq, a bound of -1
// leaving that side open: the diagonal ends in the bottom-right corner of
// the Nq x Nk score matrix (FA2 >= 2.1), and causal is right = 0.
type scoreMask struct {
	off, nk     int
	left, right int
	softcap     float32   // 0: no cap
	alibi       []float32 // nil, or one slope per query head
}

func (m scoreMask) visible(i, j int) bool {
	return (m.right < 0 || j <= i+m.off+m.right) && (m.left < 0 || j >= i+m.off-m.left)
}

// keys is the range [lo, hi] of keys row i sees, empty when lo > hi. Both
// ends grow with i.
func (m scoreMask) keys(i int) (lo, hi int) {
	lo, hi = 0, m.nk-1
	if m.left >= 0 {
		lo = max(lo, i+m.off-m.left)
	}
	if m.right >= 0 {
		hi = min(hi, i+m.off+m.right)
	}
	return lo, hi
}

// seesAny reports whether row i sees at least one key.
func (m scoreMask) seesAny(i int) bool {
	lo, hi := m.keys(i)
	return lo <= hi
}

// score turns x = scale*q_i.k_j of query head h into the score the softmax
// sees: capped to softcap*tanh(x/softcap), then biased by -slope*|i+off-j|.
// dx is ds/dx, the factor by which the backward pass turns dS into the
// gradient of x (ALiBi's bias depends on no input).
func (m scoreMask) score(h, i, j int, x float32) (s, dx float32) {
	s, dx = x, 1
	if m.softcap > 0 {
		t := float32(math.Tanh(float64(x / m.softcap)))
		s, dx = m.softcap*t, 1-t*t
	}
	if m.alibi != nil {
		d := i + m.off - j
		s -= m.alibi[h] * float32(max(d, -d))
	}
	return s, dx
}

// gather copies head h of batch b of t into m, a dense N x D matrix.
func gather(m []float32, t *Tensor, b, h int) {
	n, dd := t.Shape.N, t.Shape.D
	for i := 0; i < n; i++ {
		t.rowInto(m[i*dd:(i+1)*dd], b, i, h)
	}
}

// setRow writes src into row n of head h of batch b.
func (t *Tensor) setRow(b, n, h int, src []float32) {
	o, sd := t.Offset(b, n, h, 0), t.Strides[3]
	if sd == 1 {
		copy(t.Data[o:o+t.Shape.D], src)
		return
	}
	for x, s := range src[:t.Shape.D] {
		t.Data[o+x*sd] = s
	}
}

// workers is the number of goroutines a CPU backend may use.
func workers(o *Options) int {
	if o != nil && o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// noScratch is the scratch constructor of jobs that need none.
func noScratch() struct{} { return struct{}{} }

// parallelFor runs job(s, i) for every i in [0, n) on at most w goroutines.
// Each goroutine makes its own scratch s once and reuses it. A job's result
// must depend only on i (never on which goroutine ran it, or when), so the
// output is the same for every w: the CPU backends are deterministic. Once
// ctx is done no further job starts, and no scratch is made (a tile as
// large as the problem is hundreds of MB to clear); the caller returns
// ctx.Err().
func parallelFor[S any](ctx context.Context, n, w int, scratch func() S, job func(s S, i int)) {
	w = min(w, n)
	if isDone(ctx) {
		return
	}
	if w <= 1 {
		s := scratch()
		for i := 0; i < n && !isDone(ctx); i++ {
			job(s, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if isDone(ctx) {
				return
			}
			s := scratch()
			for i := int(next.Add(1) - 1); i < n && !isDone(ctx); i = int(next.Add(1) - 1) {
				job(s, i)
			}
		}()
	}
	wg.Wait()
}

// isDone reports whether ctx is done, without blocking; jobs whose rows
// are long also ask it between K (or Q) blocks, and every pollRows rows
// inside a tile.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done(): // nil for context.Background: never ready
		return true
	default:
		return false
	}
}

// pollWork is about how many multiply-adds a CPU job does between two
// looks at its context (a fraction of a millisecond in pure Go): a tile as
// large as the problem (BlockQ = BlockK = N, one job of N^2*D work) still
// stops soon after a cancel, while a default 64 x 64 tile (at D >= 64)
// needs no look inside it: the one between K blocks covers it.
const pollWork = 1 << 18

// pollRows is how many rows of a tile with nc keys of head dim dd a job
// computes between two looks at its context: at least 1.
func pollRows(nc, dd int) int { return max(1, pollWork/max(1, nc*dd)) }

// polled reports whether row r of a tile, polling every `every` rows, is
// one at which to look at ctx, and ctx is done then.
func polled(ctx context.Context, r, every int) bool {
	return r > 0 && r%every == 0 && isDone(ctx)
}

// stopped is the error of a CPU call once its jobs are done: nil, or the
// context's error when it stopped them early.
func stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("flashattn: stopped: %w", err)
	}
	return nil
}

// dot is the inner product of a and b[:len(a)]. Four partial sums break the
// dependency chain of one accumulator (about 2-3x faster in pure Go).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds alpha*x to y[:len(x)].
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, xi := range x {
		y[i] += alpha * xi
	}
}

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }
func log32(x float32) float32 { return float32(math.Log(float64(x))) }
