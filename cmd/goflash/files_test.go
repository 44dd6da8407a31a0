//go:build unix

package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteFileAtomic: a write that fails half way (a full disk, an
// interrupt) leaves the old file whole and no temporary file behind.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bench.json")
	if err := writeFileAtomic(p, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := writeFileAtomic(p, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half of the n"); err != nil {
			return err
		}
		return full
	})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), p) {
		t.Errorf("failed write: %v, want it wrapped with the path", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "old" {
		t.Errorf("after a failed write the file holds %q, %v; want the old content", b, err)
	}
	if err := writeFileAtomic(p, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	st, serr := os.Stat(p)
	if err != nil || string(b) != "new" || serr != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("after a write: %q, %v, mode %v", b, err, st.Mode())
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("temporary files left: %v", es)
	}
	if err := writeFileAtomic(filepath.Join(dir, "no", "such", "dir", "x"), func(io.Writer) error { return nil }); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

// TestCheckWritable: an --out under a regular file cannot be written, and
// says so as a usage error before any work; a good one leaves nothing.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := checkWritable(filepath.Join(dir, "sub", "report.html")); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(filepath.Join(dir, "sub")); len(es) != 0 {
		t.Errorf("checkWritable left %v", es)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := checkWritable(filepath.Join(file, "report.html"))
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--out") {
		t.Errorf("--out under a file: %v, want a usage error", err)
	}
	// The demo checks before it runs: one line, exit 2, at once.
	t0 := time.Now()
	code, _, stderr := runCLI(t, "demo", "--out", filepath.Join(file, "r.html"))
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || time.Since(t0) > 5*time.Second {
		t.Errorf("demo with a bad --out: exit %d, %q after %v", code, stderr, time.Since(t0))
	}
	// An --out that names a directory, existing or by its trailing slash,
	// is refused before the work too, not when the report is renamed over it.
	for _, out := range []string{dir, filepath.Join(dir, "new") + string(filepath.Separator)} {
		t0 = time.Now()
		code, _, stderr = runCLI(t, "demo", "--out", out)
		if code != exitUsage || !strings.Contains(stderr, "is a directory") || time.Since(t0) > 5*time.Second {
			t.Errorf("demo --out %s: exit %d, %q after %v", out, code, stderr, time.Since(t0))
		}
	}
}

// TestInterruptContext: SIGINT cancels the context instead of ending the
// process.
func TestInterruptContext(t *testing.T) {
	ctx, stop := interruptContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
}
