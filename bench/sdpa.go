package bench

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
	"slices"
	"time"

	"github.com/goflash/goflash/flashattn"
)

// The PyTorch side of a comparison is bench/sdpa.py, run as a child process:
// a JSON Spec on its stdin, one JSON Output on its stdout, progress lines on
// its stderr.

// SDPASchema names the format of sdpa.py's Output.
const SDPASchema = "goflash-sdpa/1"

// ScriptPath is sdpa.py's path in the repository.
const ScriptPath = "bench/sdpa.py"

// EmulateSM75 asks sdpa.py to answer as PyTorch does on a Turing GPU (T4):
// the flash backend is reported unsupported with PyTorch's own reason, the
// other backends run for real on the device at hand.
const EmulateSM75 = "sm75"

// Emulations are the values Spec.Emulate accepts ("" is none).
var Emulations = []string{EmulateSM75}

// DTypes are the values Spec.DType accepts ("" is fp16), as sdpa.py's DTYPES.
var DTypes = []string{"fp16", "bf16"}

// Spec is the input of bench/sdpa.py.
type Spec struct {
	Reps       int      `json:"reps"`
	Warmup     int      `json:"warmup"`
	Device     int      `json:"device"`
	Emulate    string   `json:"emulate,omitempty"`
	DType      string   `json:"dtype,omitempty"` // the inputs' element type: "fp16" ("" too) or "bf16"
	Backends   []string `json:"backends"`
	Directions []string `json:"directions"`
	Shapes     []Shape  `json:"shapes"`
}

// Shape is one problem of a Spec.
type Shape struct {
	B      int  `json:"b"`
	Hq     int  `json:"hq"`
	Hkv    int  `json:"hkv"`
	Nq     int  `json:"nq"`
	Nk     int  `json:"nk"`
	D      int  `json:"d"`
	Causal bool `json:"causal"`
}

// ShapeOf is the Shape of a problem.
func ShapeOf(d flashattn.Dims, causal bool) Shape {
	return Shape{B: d.B, Hq: d.Hq, Hkv: d.Hkv, Nq: d.Nq, Nk: d.Nk, D: d.D, Causal: causal}
}

// check refuses a shape read from a file that no run measures: a negative
// dimension, or element counts (Q's, the cache's bytes) beyond int64.
func (s Shape) check() error {
	for _, x := range [6]int{s.B, s.Hq, s.Hkv, s.Nq, s.Nk, s.D} {
		if x < 0 {
			return fmt.Errorf("shape %+v: a negative dimension", s)
		}
	}
	const limit = 1 << 62
	if float64(s.B)*float64(max(s.Hq, s.Hkv))*float64(max(s.Nq, s.Nk))*float64(s.D)*4 >= limit {
		return fmt.Errorf("shape %+v: too large", s)
	}
	return nil
}

// Dims is the problem's dimensions.
func (s Shape) Dims() flashattn.Dims {
	return flashattn.Dims{B: s.B, Nq: s.Nq, Nk: s.Nk, Hq: s.Hq, Hkv: s.Hkv, D: s.D}
}

// Output is the output of bench/sdpa.py.
type Output struct {
	Schema string `json:"schema"`
	// Error is set when nothing was timed; Outcome then says whether that
	// is a skip (no torch, no CUDA device) or an error (a bad spec).
	Error      string      `json:"error"`
	Outcome    string      `json:"outcome"`
	Emulate    string      `json:"emulate"`
	Torch      string      `json:"torch"`
	CUDA       string      `json:"cuda"`
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	DType      string      `json:"dtype"` // the inputs' element type it timed ("" from a script before it said)
	Driver     string      `json:"driver"`
	Date       string      `json:"date"`
	Results    []OutputRow `json:"results"`
}

// OutputRow is one timed (backend, direction, shape) of an Output.
type OutputRow struct {
	Shape
	Backend    string  `json:"backend"`
	Direction  string  `json:"direction"`
	Status     string  `json:"status"`
	Reason     string  `json:"reason"`
	MS         float64 `json:"ms"`
	FLOPs      float64 `json:"flops"`
	TFLOPs     float64 `json:"tflops"`
	ExtraBytes int64   `json:"extra_bytes"`
	GQA        string  `json:"gqa"`
}

// Rows converts the results to result rows (Impl "torch-" + backend).
func (o *Output) Rows() []Row {
	var rows []Row
	for _, r := range o.Results {
		row := Row{Impl: ImplTorchPref + r.Backend, Direction: r.Direction, Shape: r.Shape,
			Status: r.Status, Reason: r.Reason, MS: r.MS, FLOPs: r.FLOPs, TFLOPs: r.TFLOPs,
			ExtraBytes: r.ExtraBytes, GQA: r.GQA}
		if r.Direction == DirDecode && r.Status == StatusOK && r.MS > 0 {
			row.TBps = DecodeTBps(r.Shape, r.MS)
		}
		rows = append(rows, row)
	}
	return rows
}

// Meta is the TorchMeta of a run that printed this Output.
func (o *Output) Meta() TorchMeta {
	if o.Error != "" {
		st := StatusSkipped
		if o.Outcome == StatusError {
			st = StatusError
		}
		return TorchMeta{Status: st, Reason: o.Error, Emulate: o.Emulate}
	}
	return TorchMeta{Version: o.Torch, CUDA: o.CUDA, Device: o.Device, Capability: o.Capability, Driver: o.Driver,
		DType: o.DType, Status: StatusOK, Emulate: o.Emulate}
}

// ParseOutput reads sdpa.py's output and checks its schema.
func ParseOutput(b []byte) (*Output, error) {
	var o Output
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	if o.Schema != SDPASchema {
		return nil, fmt.Errorf("schema %q, want %s", o.Schema, SDPASchema)
	}
	for i, r := range o.Results {
		if err := r.Shape.check(); err != nil {
			return nil, fmt.Errorf("result %d: %v", i, err)
		}
		if r.MS < 0 {
			return nil, fmt.Errorf("result %d: ms %v", i, r.MS)
		}
	}
	return &o, nil
}

// SpecError is a Spec that sdpa.py would refuse.
type SpecError struct{ Reason string }

func (e *SpecError) Error() string { return "bench: bad SDPA spec: " + e.Reason }

// Check reports what is wrong with the spec, if anything.
func (s Spec) Check() error {
	switch {
	case len(s.Shapes) == 0:
		return &SpecError{"no shapes"}
	case s.Emulate != "" && !slices.Contains(Emulations, s.Emulate):
		return &SpecError{fmt.Sprintf("emulate %q: want one of %q", s.Emulate, Emulations)}
	case s.Reps < 0 || s.Warmup < 0 || s.Device < 0:
		return &SpecError{"reps, warmup and device must not be negative"}
	case !slices.Contains(DTypes, s.DType) && s.DType != "":
		return &SpecError{fmt.Sprintf("dtype %q: want one of %q", s.DType, DTypes)}
	}
	for _, b := range s.Backends {
		if !slices.Contains(TorchBackends, b) {
			return &SpecError{fmt.Sprintf("backend %q: want one of %q", b, TorchBackends)}
		}
	}
	return nil
}

// SDPA runs bench/sdpa.py.
type SDPA struct {
	Python string    // the interpreter; "" is python3
	Script string    // the path of sdpa.py (FindScript)
	Stderr io.Writer // receives sdpa.py's progress lines; nil discards them
}

// Run times PyTorch on the spec. Its outcome is in the returned TorchMeta's
// Status: StatusOK with the rows; StatusSkipped when PyTorch cannot run here
// (no python, no torch, no CUDA device for torch); StatusError when sdpa.py
// failed or refused the spec. The Reason says why, in one line.
func (s SDPA) Run(ctx context.Context, spec Spec) (TorchMeta, []Row) {
	if err := spec.Check(); err != nil {
		return TorchMeta{Status: StatusError, Reason: err.Error(), Emulate: spec.Emulate}, nil
	}
	python := s.Python
	if python == "" {
		python = "python3"
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return TorchMeta{Status: StatusError, Reason: err.Error()}, nil
	}
	if _, err := exec.LookPath(python); err != nil {
		return TorchMeta{Status: StatusSkipped, Reason: fmt.Sprintf("%s not found", python), Emulate: spec.Emulate}, nil
	}
	cmd := exec.CommandContext(ctx, python, s.Script, "-")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = s.Stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	so, err := ParseOutput(out.Bytes())
	switch {
	case err != nil && runErr != nil:
		return TorchMeta{Status: StatusError, Reason: fmt.Sprintf("%s %s: %v", python, s.Script, runErr), Emulate: spec.Emulate}, nil
	case err != nil:
		return TorchMeta{Status: StatusError, Reason: fmt.Sprintf("%s printed no valid output: %v", s.Script, err), Emulate: spec.Emulate}, nil
	case so.Error != "":
		return so.Meta(), nil
	case runErr != nil:
		return TorchMeta{Status: StatusError, Reason: runErr.Error(), Emulate: spec.Emulate}, nil
	case so.Emulate != spec.Emulate:
		return TorchMeta{Status: StatusError, Reason: fmt.Sprintf("%s answered emulate %q to a spec asking %q (an older sdpa.py?)", s.Script, so.Emulate, spec.Emulate)}, nil
	}
	return so.Meta(), so.Rows()
}

// FindScript locates bench/sdpa.py: the given path if any, else in one of
// the directories in dirs or one of their parents, else from the working
// directory or beside the executable (a binary in <repo>/.build/ finds
// <repo>/bench/sdpa.py).
func FindScript(given string, dirs ...string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", err
		}
		return given, nil
	}
	starts := slices.Clone(dirs)
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for dir := s; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, ScriptPath)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New(ScriptPath + " not found from the working directory or the executable (run from the repository root or pass its path)")
}
