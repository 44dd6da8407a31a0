package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// A problem too large for this machine is one line on stderr and exit
// status 3, distinct from bad usage (2) and failures (1): before anything
// is allocated, whatever the size.
func TestTooLargeForThisMachine(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--sizes", "1", "--heads", "30000000000", "--headdim", "1"},
		{"demo", "--sizes", "2", "--heads", "5000000000", "--headdim", "1", "--backend", "cpu"},
		{"bench", "--backend", "cpu", "--seqlens", "100000000", "--headdims", "64"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitTooLarge || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "goflash") ||
			!strings.Contains(stderr, "of host memory; this machine allows") || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line", args, code, stdout, stderr, exitTooLarge)
		}
	}
	// The library's own refusals map to the same status.
	for _, err := range []error{
		&flashattn.MemoryError{What: "Forward", Need: 2, Limit: 1},
		fmt.Errorf("random N=8: %w", &flashattn.MemoryError{What: "q", Need: 2, Limit: 1}),
		fmt.Errorf("allocating: %w", flashattn.ErrOutOfMemory),
	} {
		if c := exitCode(err); c != exitTooLarge {
			t.Errorf("exitCode(%v) = %d, want %d", err, c, exitTooLarge)
		}
	}
	if exitCode(usagef("x")) != exitUsage || exitCode(errors.New("x")) != exitFailure {
		t.Error("exitCode of a usage error or a failure")
	}
	_, stdout, _ := runCLI(t, "help")
	if !strings.Contains(stdout, "3 too large for this machine") {
		t.Errorf("the usage does not document exit status 3: %q", stdout)
	}
}
