package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goflash/goflash/flashattn"
)

// TestWorkersBeyondMaxUpFront: --workers beyond flashattn.MaxWorkers is a
// usage error (exit 2, one line) before any work, in every command that
// takes it, not a failure (exit 1) after the demo has started.
func TestWorkersBeyondMaxUpFront(t *testing.T) {
	out := t.TempDir()
	for _, args := range [][]string{
		{"demo", "--workers", "2000", "--no-report"},
		{"demo", "--workers", fmt.Sprint(flashattn.MaxWorkers + 1), "--no-report"},
		{"bench", "--workers", "2000", "--backend", "cpu-flash", "--seqlens", "16", "--headdims", "8", "--reps", "1", "--out", out},
		{"check", "--workers", "2000"},
	} {
		t0 := time.Now()
		code, stdout, stderr := runCLI(t, args...)
		took := time.Since(t0)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--workers") || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and one line naming --workers", args, code, stderr, stdout, exitUsage)
		}
		if took > time.Second {
			t.Errorf("%v: refused after %v, want up front", args, took)
		}
	}
	if code, _, stderr := runCLI(t, "demo", "--workers", fmt.Sprint(flashattn.MaxWorkers), "--sizes", "16", "--heads", "1", "--headdim", "8", "--reps", "1", "--no-report", "--backend", "cpu"); code != exitOK {
		t.Errorf("demo --workers MaxWorkers: exit %d, %q", code, stderr)
	}
}

// TestCheckDeviceWithoutGPU: check --device N on a machine without a GPU
// fails with a message saying so, instead of self-testing the CPU and
// exiting 0.
func TestCheckDeviceWithoutGPU(t *testing.T) {
	list := listGPUs
	t.Cleanup(func() { listGPUs = list })
	listGPUs = func() ([]DeviceMeta, error) {
		return nil, fmt.Errorf("%w: no NVIDIA driver found (libcuda.so.1)", flashattn.ErrNoGPU)
	}
	code, stdout, stderr := runCLI(t, "check", "--device", "3")
	if code == exitOK || !strings.Contains(stderr, "--device 3") || !strings.Contains(stderr, "no usable NVIDIA GPU") {
		t.Errorf("check --device 3 without a GPU: exit %d, stderr %q, stdout %q; want non-zero and a message naming --device 3 and why", code, stderr, stdout)
	}
	if code, _, stderr := runCLI(t, "check", "--json"); code != exitOK {
		t.Errorf("check without --device and without a GPU: exit %d, %q (the CPU self-tests)", code, stderr)
	}
}
