// Package benchtest stands in for bench/sdpa.py where PyTorch is absent:
// in unit tests (a test binary re-executed as the "python") and in CI's run
// of notebook 07 (cmd fakesdpa). Its answers are fixed rates, not
// measurements, and name their device "benchtest fake" so that nothing
// drawn from them passes for a timing.
package benchtest

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
)

// Kinds of answer.
const (
	// T4 answers as PyTorch 2.x does on a T4 (sm_75): flash and cudnn
	// unsupported with sdpa.py's emulated reasons, efficient and math timed.
	T4 = "t4"
	// OK answers flash, cudnn and efficient timed, math skipped for memory.
	OK = "ok"
	// NoTorch answers as sdpa.py does when torch cannot be imported.
	NoTorch = "notorch"
	// FP16Only answers as OK, but as a sdpa.py older than the spec's dtype
	// did: fp16 inputs whatever the spec asks, and no dtype in its output.
	FP16Only = "fp16only"
)

// Device and Torch name the fake PyTorch side.
const (
	Device = "benchtest fake GPU (fixed rates, not a measurement)"
	Torch  = "0.0-fake"
)

// Rates are the fake backends' TFLOP/s.
var Rates = map[string]float64{"flash": 2e-3, "cudnn": 4e-3, "efficient": 1e-3, "math": 0.25e-3}

// SM75Reasons are what sdpa.py's sm_75 emulation reports for the backends it
// refuses: the error of a forced sdpa_kernel call and the warning that says
// why (PyTorch's for flash, sdpa.py's own for cudnn).
var SM75Reasons = map[string]string{
	"flash": "No available kernel. Aborting execution. (Flash attention only supports gpu architectures in the range [sm80, sm121]. Attempting to run on a sm 7.5 gpu.)",
	"cudnn": "No available kernel. Aborting execution. (cuDNN attention needs sm80 or newer (emulated sm 7.5 gpu))",
}

// Answer is sdpa.py's output of the given kind for spec.
func Answer(kind string, spec bench.Spec) (bench.Output, error) {
	out := bench.Output{Schema: bench.SDPASchema, Emulate: spec.Emulate}
	switch kind {
	case NoTorch:
		out.Error, out.Outcome = "PyTorch is not importable (ModuleNotFoundError: No module named 'torch')", bench.StatusSkipped
		return out, nil
	case T4, OK, FP16Only:
	default:
		return out, fmt.Errorf("benchtest: unknown kind %q", kind)
	}
	out.Torch, out.CUDA, out.Device, out.Driver, out.DType = Torch, "0.0", Device, "000.00", spec.DType
	if out.DType == "" {
		out.DType = "fp16" // as sdpa.py answers a spec without one
	}
	if kind == FP16Only {
		kind, out.DType = OK, ""
	}
	out.Capability = map[string]string{T4: "7.5", OK: "9.0"}[kind]
	for _, s := range spec.Shapes {
		for _, d := range spec.Directions {
			for _, b := range spec.Backends {
				fl := flashattn.Dims{B: s.B, Nq: s.Nq, Nk: s.Nk, Hq: s.Hq, Hkv: s.Hkv, D: s.D}.FLOPs(s.Causal) *
					map[string]float64{bench.DirFwd: 1, bench.DirBwd: 2.5, bench.DirFwdBwd: 3.5, bench.DirDecode: 1}[d]
				r := bench.OutputRow{Shape: s, Backend: b, Direction: d, FLOPs: fl, Status: bench.StatusOK, TFLOPs: Rates[b]}
				switch {
				case kind == T4 && SM75Reasons[b] != "":
					r.Status, r.Reason, r.TFLOPs = bench.StatusUnsupported, SM75Reasons[b], 0
				case kind == OK && b == "math":
					r.Status, r.Reason, r.TFLOPs = bench.StatusSkipped, "math needs too much memory (fake)", 0
				}
				if r.Status == bench.StatusOK {
					r.MS = fl / (r.TFLOPs * 1e12) * 1e3
					r.ExtraBytes = int64(s.B * s.Hq * s.Nq * 4) // an LSE's worth
				}
				out.Results = append(out.Results, r)
			}
		}
	}
	return out, nil
}

// Serve reads a spec from r and writes the answer of the given kind to w, as
// sdpa.py does; it returns sdpa.py's exit status (2 when nothing was timed).
func Serve(kind string, r io.Reader, w io.Writer) int {
	var spec bench.Spec
	if err := json.NewDecoder(r).Decode(&spec); err != nil {
		fmt.Fprintf(w, `{"schema": %q, "error": "bad spec: %v", "outcome": "error"}`+"\n", bench.SDPASchema, err)
		return 2
	}
	out, err := Answer(kind, spec)
	if err != nil {
		out.Error, out.Outcome = err.Error(), bench.StatusError
	}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		return 1
	}
	if out.Error != "" {
		return 2
	}
	return 0
}
