package flashattn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
)

// TestCancelSingleBlock: with BlockQ = BlockK >= N (one tile as large as
// the problem, which Options' doc offers for "a single block") a cancel
// still stops CPUFlash's forward and backward within a second: the
// backends look at the context inside a tile's rows, not only between
// blocks. Uncancelled, the forward takes several seconds on one core and
// the backward about twice that (the log estimates the forward from an
// eighth of the shape). A machine busy with other work can delay the
// goroutine that cancels: a call over the bound is tried again, twice, and
// the test fails only when every try is late (a call that looks at its
// context only between blocks is late every time, by seconds).
func TestCancelSingleBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of CPU work")
	}
	const n = 8192
	d := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 1, Hkv: 1, D: 64}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	lse := make([]float32, d.LSELen())
	o := &flashattn.Options{Backend: flashattn.CPUFlash, Workers: 1, BlockQ: n, BlockK: n}

	// The whole call's time, from an eighth of the rows of an eighth of the keys.
	de := flashattn.Dims{B: 1, Nq: n / 8, Nk: n / 8, Hq: 1, Hkv: 1, D: 64}
	t0 := time.Now()
	if _, err := flashattn.Forward(flashattn.Random(de.QShape(), 1), flashattn.Random(de.KVShape(), 2), flashattn.Random(de.KVShape(), 3), o); err != nil {
		t.Fatal(err)
	}
	t.Logf("uncancelled forward of %+v: about %v", d, 64*time.Since(t0))

	const after, within, tries = 100 * time.Millisecond, time.Second, 3
	for _, backward := range []bool{false, true} {
		for try := 1; ; try++ {
			took, err := cancelledCall(after, backward, q, k, v, lse, o)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("backward %t: %v, want context.Canceled", backward, err)
			}
			t.Logf("backward %t, try %d: stopped after %v (cancelled at %v)", backward, try, took, after)
			if took <= after+within {
				break
			}
			if try == tries {
				t.Errorf("backward %t: returned %v after the call began, cancelled at %v, in each of %d tries: want within %v of the cancel", backward, took, after, tries, within)
				break
			}
		}
	}
}
