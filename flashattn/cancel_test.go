package flashattn_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
)

// TestCancelStopsSoon: a CPU call that would take tens of seconds returns
// context.Canceled soon after the cancel, forward and backward, on both CPU
// backends, even with one Q block as long as the problem. Unloaded it stops
// within a second (the logs say how soon); the bound is 3 s so that a
// machine busy with other tests (CI's parallel packages, the race detector)
// does not fail it, still a fraction of the uncancelled call.
func TestCancelStopsSoon(t *testing.T) {
	d := flashattn.Dims{B: 1, Nq: 8192, Nk: 8192, Hq: 8, Hkv: 8, D: 64} // tens of seconds of CPU work
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	lse := make([]float32, d.LSELen())
	for _, o := range []*flashattn.Options{
		{Backend: flashattn.CPUFlash, Workers: 2},
		{Backend: flashattn.CPUFlash, Workers: 1, BlockQ: 8192},
		{Backend: flashattn.CPUNaive, Workers: 2},
	} {
		for _, backward := range []bool{false, true} {
			if backward && o.Backend == flashattn.CPUNaive {
				continue // its 3 x 8192^2 buffers: the forward shows the same loop
			}
			took, err := cancelledCall(200*time.Millisecond, backward, q, k, v, lse, o)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%v BlockQ %d backward %t: %v, want context.Canceled", o.Backend, o.BlockQ, backward, err)
			}
			if took > 200*time.Millisecond+3*time.Second {
				t.Errorf("%v BlockQ %d backward %t: returned %v after the call began (cancelled at 200ms)", o.Backend, o.BlockQ, backward, took)
			}
			t.Logf("%v BlockQ %d backward %t: stopped after %v", o.Backend, o.BlockQ, backward, took)
		}
	}
	// A done context stops a call before it starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := flashattn.ForwardContext(ctx, q, k, v, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}
}

// TestContextVariantsSameBits: a context that is never done changes nothing.
func TestContextVariantsSameBits(t *testing.T) {
	d := flashattn.Dims{B: 1, Nq: 70, Nk: 50, Hq: 2, Hkv: 1, D: 16}
	q, k, v, dO := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3), flashattn.Random(d.QShape(), 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		o := &flashattn.Options{Backend: be, Causal: true, BlockQ: 16, BlockK: 8}
		a, err := flashattn.Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := flashattn.ForwardContext(ctx, q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		ga, err := flashattn.Backward(q, k, v, a.Out, dO, a.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := flashattn.BackwardContext(ctx, q, k, v, a.Out, dO, a.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		bits := func(xs ...[]float32) []uint32 {
			var out []uint32
			for _, x := range slices.Concat(xs...) {
				out = append(out, math.Float32bits(x))
			}
			return out
		}
		if !slices.Equal(bits(a.Out.Data, a.LSE, ga.DQ.Data, ga.DK.Data, ga.DV.Data), bits(b.Out.Data, b.LSE, gb.DQ.Data, gb.DK.Data, gb.DV.Data)) {
			t.Errorf("%v: the context variants differ", be)
		}
	}
}

// cancelledCall runs a forward (or, with backward, a backward with dOut = q
// and out = q) whose context is cancelled after the given time, and returns
// how long the call took and its error.
func cancelledCall(after time.Duration, backward bool, q, k, v *flashattn.Tensor, lse []float32, o *flashattn.Options) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(after, cancel)
	t0 := time.Now()
	var err error
	if backward {
		_, err = flashattn.BackwardContext(ctx, q, k, v, q, q, lse, o)
	} else {
		_, err = flashattn.ForwardContext(ctx, q, k, v, o)
	}
	return time.Since(t0), err
}
