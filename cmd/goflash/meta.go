package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/goflash/goflash/bench"
)

// commit can be set at build time:
//
//	go build -ldflags "-X main.commit=$(git rev-parse HEAD)" ./cmd/goflash
var commit string

// Meta describes where and when a result was produced.
type Meta = bench.Meta

func newMeta() Meta {
	return Meta{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Commit:    sourceCommit(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		CPUs:      runtime.GOMAXPROCS(0),
		CPUModel:  cpuModel(),
	}
}

// sourceCommit is the revision the binary was built from: the -X value, else
// the VCS stamp of the build (go build -buildvcs=true), else what git says
// about the working directory, else "unknown".
func sourceCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "+dirty"
			}
			return rev
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err == nil {
		rev := strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			rev += "+dirty"
		}
		return rev
	}
	return "unknown"
}

// cpuModel reads the processor name on Linux; empty elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
