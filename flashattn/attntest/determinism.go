package attntest

import (
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// runDeterministic runs forward and backward twice with
// Options.Deterministic on a GQA causal case and wants identical bits.
func runDeterministic(t *testing.T, b Backend) {
	var c Case
	for _, cc := range Cases() {
		if cc.Causal && cc.Hq > cc.Hkv && cc.Nq > 64 && b.supportsCase(cc) && (b.MaxN == 0 || max(cc.Nq, cc.Nk) <= b.MaxN) {
			c = cc
			break
		}
	}
	if c.Name == "" {
		t.Skipf("%s supports no GQA causal case", b.Name)
	}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	o.Deterministic = true
	var runs [2][]uint32
	for r := range runs {
		res, err := b.Forward(q, k, v, o)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		runs[r] = append(snapshot(res.Out), snapshot(&flashattn.Tensor{Data: res.LSE})...)
		if b.Backward != nil {
			g, err := b.Backward(q, k, v, res.Out, dO, res.LSE, o)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			runs[r] = append(runs[r], snapshot(g.DQ, g.DK, g.DV)...)
		}
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Errorf("%s on %v: two runs with Deterministic differ", b.Name, c)
	}
}
