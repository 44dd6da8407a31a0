//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptWriteEnv makes the test binary, started by
// TestSecondInterruptWhileWriting, take bench's signals (benchContext) and,
// after the first SIGINT, write DIR/bench.json as bench does
// (writeFileAtomic), slowly: it stops halfway for a minute, like a slow
// disk, so that the second SIGINT lands while the file is being written.
const interruptWriteEnv = "GOFLASH_TEST_INTERRUPT_WRITE"

func init() {
	dir := os.Getenv(interruptWriteEnv)
	if dir == "" {
		return
	}
	ctx, stop := benchContext(context.Background())
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	err := writeFileAtomic(filepath.Join(dir, "bench.json"), func(w io.Writer) error {
		if _, err := io.WriteString(w, `{"partial": tr`); err != nil {
			return err
		}
		fmt.Println("writing")
		time.Sleep(time.Minute)
		_, err := io.WriteString(w, "ue}\n")
		return err
	})
	fmt.Println("wrote:", err)
	os.Exit(exitInterrupted)
}

// TestSecondInterruptWhileWriting: a second Ctrl-C 1-10 ms after the
// first, while bench writes its files, quits at once with status 130,
// leaves no hidden temporary file (.bench.json.tmp*) and leaves the
// bench.json that was there whole.
func TestSecondInterruptWhileWriting(t *testing.T) {
	const old = `{"old": true}` + "\n"
	for _, gap := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "bench.json"), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), interruptWriteEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		next := func(want string) {
			if !lines.Scan() || lines.Text() != want {
				t.Fatalf("gap %v: child said %q (%v), want %q", gap, lines.Text(), lines.Err(), want)
			}
		}
		next("ready")
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		next("writing")
		time.Sleep(gap)
		t0 := time.Now()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(out)
		err = cmd.Wait()
		took := time.Since(t0)
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("gap %v: child ended %v (%s), want exit status %d", gap, err, rest, exitInterrupted)
		}
		if took > 5*time.Second {
			t.Errorf("gap %v: the second SIGINT took %v to end the child, want at once", gap, took)
		}
		tmps, _ := filepath.Glob(filepath.Join(dir, ".bench*"))
		if len(tmps) > 0 {
			t.Errorf("gap %v: temporary files left: %v", gap, tmps)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "bench.json")); err != nil || string(b) != old {
			t.Errorf("gap %v: bench.json is %q (%v), want the old one whole %q", gap, b, err, old)
		}
		if strings.Contains(string(rest), "wrote") {
			t.Errorf("gap %v: the write went on after the second SIGINT: %s", gap, rest)
		}
	}
}
