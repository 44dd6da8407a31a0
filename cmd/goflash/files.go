package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// writeFileAtomic writes path through write: into a temporary file in the
// same directory, synced, then renamed over path. A reader, a crash, a full
// disk or an interrupt sees the old file or the whole new one, never a
// truncated one; on error the temporary file is removed and path is left
// as it was.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				err = errors.Join(err, f.Close())
			}
			err = errors.Join(fmt.Errorf("writing %s: %w", path, err), os.Remove(f.Name()))
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp's 0600 is not what a report wants
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	closed = true
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// checkWritable makes path's directory (as the command will) and checks
// that a file can be created there, so that a long run finds a bad --out
// before it starts, not after.
func checkWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() || strings.HasSuffix(path, string(filepath.Separator)) {
		return usagef("--out %s: that is a directory, not a file to write", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usagef("--out %s: %v", path, err)
	}
	f, err := os.CreateTemp(dir, ".goflash-check*")
	if err != nil {
		return usagef("--out %s: cannot write there: %v", path, err)
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// interruptContext is done at the first SIGINT (Ctrl-C) or SIGTERM: a long
// run passes it to flashattn.ForwardContext/BackwardContext, stops within a
// second and keeps what it measured. stop restores the default handling, so
// a second Ctrl-C after it ends the process at once.
func interruptContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
