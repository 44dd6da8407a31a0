// Command cpuonly is the smallest program that uses GoFlash: attention on
// the CPU, with no GPU code path taken. Built with the goflash_nogpu tag it
// leaves out the embedded kernel images (about 30 MB), the CPU backends
// unchanged:
//
//	go build -tags goflash_nogpu -ldflags='-s -w' ./examples/cpuonly
package main

import (
	"fmt"
	"os"

	"github.com/goflash/goflash/flashattn"
)

func main() {
	d := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 4, Hkv: 4, D: 64}
	q, k, v := flashattn.Random(d.QShape(), 1), flashattn.Random(d.KVShape(), 2), flashattn.Random(d.KVShape(), 3)
	res, err := flashattn.Forward(q, k, v, &flashattn.Options{Causal: true, Backend: flashattn.CPUFlash})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuonly:", err)
		os.Exit(1)
	}
	fmt.Printf("%v on %v: out[0] = %.4f, LSE[0] = %.4f\n", d, res.Backend, res.Out.At(0, 0, 0, 0), res.LSE[0])
}
