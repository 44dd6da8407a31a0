package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// Under an address-space limit (ulimit -v, RLIMIT_AS) a demo too large for
// it is refused as too large for this machine (one line, exit status 3)
// before anything is allocated, not ended by the Go runtime's "fatal error:
// out of memory": flashattn.HostMemoryLimit follows the limit.
func TestDemoUnderAddressSpaceLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_AS is read on Linux")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run ulimit -v")
	}
	cmd := exec.Command(sh, "-c", `ulimit -v 6000000 && exec "$0" demo --sizes 1 --heads 1 --headdim 300000000`, os.Args[0])
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	msg := stderr.String()
	if i := strings.Index(msg, "fatal error"); i >= 0 {
		msg = msg[i:min(len(msg), i+400)]
	}
	if code != exitTooLarge || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(msg, "of host memory; this machine allows") {
		t.Errorf("goflash demo --headdim 300000000 under ulimit -v 6000000: exit %d, stderr %q; want exit %d and one line", code, msg, exitTooLarge)
	}
}
