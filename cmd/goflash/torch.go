package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The PyTorch side of a comparison is bench/sdpa.py, run as a child process:
// a JSON spec on its stdin, one JSON document on its stdout, progress lines
// on its stderr (passed through).

// sdpaSpec is the input of bench/sdpa.py.
type sdpaSpec struct {
	Reps       int         `json:"reps"`
	Warmup     int         `json:"warmup"`
	Device     int         `json:"device"`
	Backends   []string    `json:"backends"`
	Directions []string    `json:"directions"`
	Shapes     []sdpaShape `json:"shapes"`
}

type sdpaShape struct {
	B      int  `json:"b"`
	Hq     int  `json:"hq"`
	Hkv    int  `json:"hkv"`
	Nq     int  `json:"nq"`
	Nk     int  `json:"nk"`
	D      int  `json:"d"`
	Causal bool `json:"causal"`
}

// sdpaOutput is the output of bench/sdpa.py.
type sdpaOutput struct {
	Schema     string `json:"schema"`
	Error      string `json:"error"`
	Torch      string `json:"torch"`
	CUDA       string `json:"cuda"`
	Device     string `json:"device"`
	Capability string `json:"capability"`
	Driver     string `json:"driver"`
	Results    []struct {
		sdpaShape
		Backend    string  `json:"backend"`
		Direction  string  `json:"direction"`
		Status     string  `json:"status"`
		Reason     string  `json:"reason"`
		MS         float64 `json:"ms"`
		FLOPs      float64 `json:"flops"`
		TFLOPs     float64 `json:"tflops"`
		ExtraBytes int64   `json:"extra_bytes"`
		GQA        string  `json:"gqa"`
	} `json:"results"`
}

const sdpaRel = "bench/sdpa.py"

// findSDPA locates bench/sdpa.py: the given path if any, else in the
// working directory or one of its parents, else beside the executable
// (a binary in <repo>/.build/ finds <repo>/bench/sdpa.py).
func findSDPA(given string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", fmt.Errorf("--sdpa %s: %w", given, err)
		}
		return given, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for dir := s; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, sdpaRel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New(sdpaRel + " not found from the working directory or the executable (run from the repository root or pass --sdpa PATH)")
}

// runTorch runs bench/sdpa.py on the cases and returns its rows. A missing
// python3 or torch, or no CUDA device for torch, is not an error: the
// returned TorchMeta says "skipped" and why.
func runTorch(ctx context.Context, python, script string, cases []Case, dirs []string, reps, warmup, device int, stderr io.Writer) (TorchMeta, []Row, error) {
	spec := sdpaSpec{Reps: reps, Warmup: warmup, Device: device, Backends: torchBackends, Directions: dirs}
	for _, c := range cases {
		d := c.Dims
		spec.Shapes = append(spec.Shapes, sdpaShape{B: d.B, Hq: d.Hq, Hkv: d.Hkv, Nq: d.Nq, Nk: d.Nk, D: d.D, Causal: c.Causal})
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return TorchMeta{}, nil, err
	}
	if _, err := exec.LookPath(python); err != nil {
		return TorchMeta{Status: statusSkipped, Reason: fmt.Sprintf("%s not found (--python)", python)}, nil, nil
	}
	cmd := exec.CommandContext(ctx, python, script, "-")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	var so sdpaOutput
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		if runErr != nil {
			return TorchMeta{Status: statusError, Reason: fmt.Sprintf("%s %s: %v", python, script, runErr)}, nil, nil
		}
		return TorchMeta{Status: statusError, Reason: fmt.Sprintf("%s printed no JSON: %v", script, err)}, nil, nil
	}
	if so.Error != "" {
		return TorchMeta{Status: statusSkipped, Reason: so.Error}, nil, nil
	}
	if runErr != nil {
		return TorchMeta{Status: statusError, Reason: runErr.Error()}, nil, nil
	}
	meta := TorchMeta{Version: so.Torch, CUDA: so.CUDA, Device: so.Device, Capability: so.Capability, Driver: so.Driver, Status: statusOK}
	var rows []Row
	for _, r := range so.Results {
		dir := r.Direction
		rows = append(rows, Row{Impl: implTorchPref + r.Backend, Direction: dir,
			B: r.B, Hq: r.Hq, Hkv: r.Hkv, Nq: r.Nq, Nk: r.Nk, D: r.D, Causal: r.Causal,
			Status: r.Status, Reason: r.Reason, MS: r.MS, FLOPs: r.FLOPs, TFLOPs: r.TFLOPs,
			ExtraBytes: r.ExtraBytes, GQA: r.GQA})
	}
	return meta, rows, nil
}

// torchDirections maps GoFlash's --direction to sdpa.py's directions.
func torchDirections(direction string) []string {
	switch direction {
	case "bwd":
		return []string{dirBwd}
	case "both":
		return []string{dirFwd, dirBwd, dirFwdBwd}
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
