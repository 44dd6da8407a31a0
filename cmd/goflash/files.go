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
	"sync"
	"syscall"
)

// temps are the temporary files writeFileAtomic and checkWritable have
// created and not yet renamed or removed: a second interrupt removes them
// before the process exits (quit). Creating, renaming and removing one
// hold the lock, so quit never races a rename.
var temps = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

// createTemp is os.CreateTemp, the file registered in temps.
func createTemp(dir, pattern string) (*os.File, error) {
	temps.Lock()
	defer temps.Unlock()
	f, err := os.CreateTemp(dir, pattern)
	if err == nil {
		temps.names[f.Name()] = true
	}
	return f, err
}

// renameTemp renames temporary file tmp to path and forgets it.
func renameTemp(tmp, path string) error {
	temps.Lock()
	defer temps.Unlock()
	delete(temps.names, tmp)
	return os.Rename(tmp, path)
}

// removeTemp removes temporary file tmp and forgets it.
func removeTemp(tmp string) error {
	temps.Lock()
	defer temps.Unlock()
	delete(temps.names, tmp)
	return os.Remove(tmp)
}

// quit ends the process at a second interrupt: it removes the temporary
// files still registered (a file being written; every finished file, old
// or new, stays whole: writes are renames) and exits with status 130,
// holding the lock so that no new temporary file is made meanwhile.
func quit() {
	temps.Lock()
	for name := range temps.names {
		_ = os.Remove(name)
	}
	os.Exit(exitInterrupted)
}

// writeFileAtomic writes path through write: into a temporary file in the
// same directory, synced, then renamed over path. A reader, a crash, a full
// disk or an interrupt sees the old file or the whole new one, never a
// truncated one; on error the temporary file is removed and path is left
// as it was, and a second interrupt (interruptContext) removes it too.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := createTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				err = errors.Join(err, f.Close())
			}
			err = errors.Join(fmt.Errorf("writing %s: %w", path, err), removeTemp(f.Name()))
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
	return renameTemp(f.Name(), path)
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
	f, err := createTemp(dir, ".goflash-check*")
	if err != nil {
		return usagef("--out %s: cannot write there: %v", path, err)
	}
	return errors.Join(f.Close(), removeTemp(f.Name()))
}

// interruptContext is done at the first SIGINT (Ctrl-C) or SIGTERM: a long
// run passes it to flashattn.ForwardContext/BackwardContext, stops within a
// second and keeps what it measured. A second one quits at once (quit):
// the temporary file of a file being written is removed, every file
// already there is left whole, and the exit status is 130. stop ends the
// handling (the default one, which ends the process, is back).
func interruptContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sig:
			quit()
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			cancel()
		})
	}
}

// benchContext is bench's interruptContext: the first Ctrl-C keeps what was
// measured; a second one quits at once, cleanly.
func benchContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return interruptContext(parent)
}
