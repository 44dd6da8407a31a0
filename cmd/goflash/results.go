package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Implementation names used in result rows.
const (
	implGPU       = "goflash-gpu"
	implGPUSM75   = "goflash-gpu-sm75" // the Turing variant forced on a newer GPU
	implCPUFlash  = "goflash-cpu-flash"
	implCPUNaive  = "goflash-cpu-naive"
	implTorchPref = "torch-" // + flash, efficient, math
)

// Directions.
const (
	dirFwd    = "fwd"
	dirBwd    = "bwd"
	dirFwdBwd = "fwdbwd" // forward then backward; for GoFlash the sum of the two medians
)

// Status of a row.
const (
	statusOK          = "ok"
	statusSkipped     = "skipped"
	statusUnsupported = "unsupported"
	statusOOM         = "oom"
	statusError       = "error"
)

// Row is one timed (implementation, direction, problem).
type Row struct {
	Impl      string `json:"impl"`
	Direction string `json:"direction"`
	B         int    `json:"b"`
	Hq        int    `json:"hq"`
	Hkv       int    `json:"hkv"`
	Nq        int    `json:"nq"`
	Nk        int    `json:"nk"`
	D         int    `json:"d"`
	Causal    bool   `json:"causal"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
	// MS is the median time of one call in milliseconds (CUDA events on the
	// GPU, wall clock on the CPU).
	MS     float64 `json:"ms,omitempty"`
	FLOPs  float64 `json:"flops"`
	TFLOPs float64 `json:"tflops,omitempty"`
	// ExtraBytes is memory of one call. GPU (GoFlash and PyTorch): device
	// bytes beyond the inputs and outputs (LSE, workspace, score matrices).
	// CPU: Go heap bytes the call allocates, outputs included.
	ExtraBytes int64 `json:"extra_bytes,omitempty"`
	// HostOverheadUS is host wall time minus kernel time per call (GPU only).
	HostOverheadUS float64 `json:"host_overhead_us,omitempty"`
	// Derived marks a row computed from other rows (GoFlash fwdbwd = fwd + bwd).
	Derived bool `json:"derived,omitempty"`
	// GQA says how torch ran a GQA case: "native" (enable_gqa) or "expanded".
	GQA string `json:"gqa,omitempty"`
	// Kernel is the GPU kernel variant that ran.
	Kernel string `json:"kernel,omitempty"`
}

func (r Row) caseOf() Case {
	return Case{Dims: dimsOf(r), Causal: r.Causal}
}

// key identifies the problem of a row, across implementations.
func (r Row) key() string {
	return fmt.Sprintf("%s|%d|%d|%d|%d|%d|%d|%t", r.Direction, r.B, r.Hq, r.Hkv, r.Nq, r.Nk, r.D, r.Causal)
}

// DeviceMeta describes the device GoFlash ran on.
type DeviceMeta struct {
	Kind       string `json:"kind"` // "gpu" or "cpu"
	Ordinal    int    `json:"ordinal"`
	Name       string `json:"name"`
	Arch       int    `json:"arch,omitempty"` // compute capability as one number: 75, 90
	SMs        int    `json:"sms,omitempty"`
	Capability string `json:"capability,omitempty"`
	Memory     int64  `json:"memory_bytes,omitempty"`
	Driver     string `json:"driver,omitempty"`
	ForcedArch int    `json:"forced_arch,omitempty"`
}

// TorchMeta describes the PyTorch side of a comparison.
type TorchMeta struct {
	Version    string `json:"torch"`
	CUDA       string `json:"cuda"`
	Device     string `json:"device"`
	Capability string `json:"capability"`
	Driver     string `json:"driver"`
	Status     string `json:"status"` // "ok", "skipped", "error"
	Reason     string `json:"reason,omitempty"`
}

// Settings are the knobs of a benchmark run.
type Settings struct {
	Reps          int    `json:"reps"`
	Warmup        int    `json:"warmup"`
	Deterministic bool   `json:"deterministic"`
	Backend       string `json:"backend"`
	Direction     string `json:"direction"`
	Workers       int    `json:"cpu_workers,omitempty"`
}

// BenchResult is a whole benchmark run, as written to JSON.
type BenchResult struct {
	Schema   string      `json:"schema"`
	Meta     Meta        `json:"meta"`
	Device   DeviceMeta  `json:"device"`
	Torch    *TorchMeta  `json:"torch,omitempty"`
	Settings Settings    `json:"settings"`
	Notes    []string    `json:"notes,omitempty"`
	Rows     []Row       `json:"rows"`
	Table    []TableLine `json:"table,omitempty"`
}

const benchSchema = "goflash-bench/1"

var csvHeader = []string{"date", "commit", "device", "capability", "driver", "impl", "direction",
	"b", "hq", "hkv", "nq", "nk", "d", "causal", "status", "ms", "tflops", "flops",
	"extra_bytes", "host_overhead_us", "derived", "gqa", "kernel", "reason"}

// writeCSV writes one line per row; the device, driver, commit and date are
// repeated on every line so that a line means something on its own.
func writeCSV(w io.Writer, res *BenchResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	for _, r := range res.Rows {
		dev, capab, drv := res.Device.Name, res.Device.Capability, res.Device.Driver
		if strings.HasPrefix(r.Impl, implTorchPref) && res.Torch != nil {
			dev, capab, drv = res.Torch.Device, res.Torch.Capability, res.Torch.Driver
		}
		rec := []string{res.Meta.Date, res.Meta.Commit, dev, capab, drv, r.Impl, r.Direction,
			strconv.Itoa(r.B), strconv.Itoa(r.Hq), strconv.Itoa(r.Hkv), strconv.Itoa(r.Nq), strconv.Itoa(r.Nk), strconv.Itoa(r.D),
			strconv.FormatBool(r.Causal), r.Status, f(r.MS), f(r.TFLOPs), f(r.FLOPs),
			strconv.FormatInt(r.ExtraBytes, 10), f(r.HostOverheadUS), strconv.FormatBool(r.Derived), r.GQA, r.Kernel, r.Reason}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFiles writes bench.json, bench.csv and bench.md into dir and returns
// their paths.
func writeFiles(dir string, res *BenchResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}
	if err := write("bench.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(res)
	}); err != nil {
		return nil, err
	}
	if err := write("bench.csv", func(w io.Writer) error { return writeCSV(w, res) }); err != nil {
		return nil, err
	}
	if err := write("bench.md", func(w io.Writer) error { return writeMarkdown(w, res) }); err != nil {
		return nil, err
	}
	return paths, nil
}

// sortRows orders rows by head dim, causal, direction, sequence length,
// implementation: the order of the FA2 paper's tables.
func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case a.D != b.D:
			return a.D < b.D
		case a.Causal != b.Causal:
			return !a.Causal
		case a.Direction != b.Direction:
			return dirOrder(a.Direction) < dirOrder(b.Direction)
		case a.Nq != b.Nq:
			return a.Nq < b.Nq
		case a.Nk != b.Nk:
			return a.Nk < b.Nk
		case a.B != b.B:
			return a.B < b.B
		case a.Hq != b.Hq:
			return a.Hq < b.Hq
		}
		return a.Hkv < b.Hkv
	})
}

func dirOrder(d string) int {
	switch d {
	case dirFwd:
		return 0
	case dirBwd:
		return 1
	}
	return 2
}
