package nb_test

import (
	"log"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/viz"
	"github.com/goflash/goflash/viz/nb"
)

// In a GoNB cell: trace a forward pass and show its tiling schedule.
func ExampleDisplay() {
	s := flashattn.Shape{B: 1, N: 256, H: 1, D: 32}
	q, k, v := flashattn.Random(s, 1), flashattn.Random(s, 2), flashattn.Random(s, 3)
	var tr flashattn.Trace
	if _, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.CPUFlash, Causal: true, Trace: &tr}); err != nil {
		log.Fatal(err)
	}
	c, err := viz.Tiling(&tr)
	if err != nil {
		log.Fatal(err)
	}
	if err := nb.Display(c); err != nil {
		log.Fatal(err)
	}
}
