// Command fakesdpa stands in for "python3 bench/sdpa.py" where PyTorch is
// absent (CI's run of notebook 07): it ignores its arguments, reads the spec
// on stdin and answers as benchtest does, by default as PyTorch on a T4
// (GOFLASH_FAKE_SDPA=t4, ok or notorch chooses).
package main

import (
	"os"

	"github.com/goflash/goflash/bench/benchtest"
)

func main() {
	kind := os.Getenv("GOFLASH_FAKE_SDPA")
	if kind == "" {
		kind = benchtest.T4
	}
	os.Exit(benchtest.Serve(kind, os.Stdin, os.Stdout))
}
