package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goflash/goflash/bench"
)

// findSDPA locates bench/sdpa.py (bench.FindScript), naming the flag when
// the given path is wrong.
func findSDPA(given string) (string, error) {
	p, err := bench.FindScript(given)
	if err != nil && given != "" {
		return "", fmt.Errorf("--sdpa %s: %w", given, err)
	}
	return p, err
}

// runTorch runs bench/sdpa.py on the cases, inputs of dtype ("fp16", "bf16"). A missing python3 or torch, or no
// CUDA device for torch, is not an error: the returned TorchMeta says
// "skipped" and why.
func runTorch(ctx context.Context, python, script string, cases []Case, dirs []string, reps, warmup, device int, emulate, dtype string, stderr io.Writer) (TorchMeta, []Row) {
	spec := bench.Spec{Reps: reps, Warmup: warmup, Device: device, Emulate: emulate, DType: dtype, Backends: bench.TorchBackends, Directions: dirs}
	for _, c := range cases {
		spec.Shapes = append(spec.Shapes, bench.ShapeOf(c.Dims, c.Causal))
	}
	return bench.SDPA{Python: python, Script: script, Stderr: stderr}.Run(ctx, spec)
}

// torchDirections maps GoFlash's --direction to sdpa.py's directions.
func torchDirections(direction string) []string {
	switch direction {
	case "bwd":
		return []string{dirBwd}
	case "both":
		return []string{dirFwd, dirBwd, dirFwdBwd}
	case dirDecode:
		return []string{dirDecode}
	}
	return []string{dirFwd}
}

func shortPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}
