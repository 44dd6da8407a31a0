// Package bench is the model of a GoFlash benchmark run and the PyTorch side
// of a comparison: the result rows that `goflash bench` writes (bench.json),
// the side-by-side table built from them, the JSON exchange with
// bench/sdpa.py (run as a child process, with typed outcomes), and the choice
// of the PyTorch baseline that speedups are measured against.
//
// It is public so that the CLI, the chart generator and the notebooks (whose
// GoNB scratch module cannot import internal packages) share one model.
package bench

import (
	"fmt"
	"sort"
)

// Schema names the format of a Result as written to bench.json.
const Schema = "goflash-bench/1"

// Implementation names used in result rows.
const (
	ImplGPU       = "goflash-gpu"
	ImplGPUSM75   = "goflash-gpu-sm75" // the Turing variant forced on a newer GPU
	ImplGPUSM80   = "goflash-gpu-sm80" // the sm_80 (mma.sync) kernels forced on an sm_90 GPU, beside its default Hopper forward
	ImplGPUDet    = "goflash-gpu-det"  // the GPU with Options.Deterministic (its backward without atomics)
	ImplGPUMod    = "goflash-gpu-mod"  // the GPU with goflash bench's --window, --softcap, --alibi (the modified forward)
	ImplCPUFlash  = "goflash-cpu-flash"
	ImplCPUNaive  = "goflash-cpu-naive"
	ImplTorchPref = "torch-" // + a TorchBackends name
	// ImplRungPref + a rung number names a kernel-ladder rung below the
	// shipped kernel (goflash bench --ladder; tutorial chapter 6), whose
	// shipped rung keeps the GPU line's name.
	ImplRungPref = "goflash-rung"
	ImplRungEdit = "goflash-rung-edit" // a ladder rung compiled at run time from an edited source (--rung-source)
)

// ImplRung is the implementation name of kernel-ladder rung r below the
// shipped kernel.
func ImplRung(r int) string { return fmt.Sprintf("%s%d", ImplRungPref, r) }

// TorchBackends are PyTorch SDPA's backends that bench/sdpa.py times, in
// table order.
var TorchBackends = []string{"flash", "cudnn", "efficient", "math"}

// Directions.
const (
	DirFwd    = "fwd"
	DirBwd    = "bwd"
	DirFwdBwd = "fwdbwd" // forward then backward; for GoFlash the sum of the two medians
	DirDecode = "decode" // KV-cache decode: Nq new rows against a cache of Nk entries per sequence
)

// Status of a row, and of the PyTorch side as a whole (ok, skipped, error).
const (
	StatusOK          = "ok"
	StatusSkipped     = "skipped"
	StatusUnsupported = "unsupported"
	StatusOOM         = "oom"
	StatusError       = "error"
)

// Row is one timed (implementation, direction, problem).
type Row struct {
	Impl      string `json:"impl"`
	Direction string `json:"direction"`
	Shape            // the problem (its fields are the row's JSON fields)
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
	// LaunchUS is the host time to enqueue one call, and BeyondLaunchUS
	// its part beyond the driver's own cuLaunchKernel calls (GoFlash GPU
	// only; flashattn.BenchResult).
	LaunchUS       float64 `json:"launch_us,omitempty"`
	BeyondLaunchUS float64 `json:"beyond_launch_us,omitempty"`
	// LaunchTimed (GoFlash GPU rows) marks a time that includes the host's
	// enqueue of the first kernel: the driver had no stream memory
	// operations for the gate that keeps it out (flashattn.BenchResult.EnqueueHidden).
	LaunchTimed bool `json:"launch_timed,omitempty"`
	// Derived marks a row computed from other rows (GoFlash fwdbwd = fwd + bwd).
	Derived bool `json:"derived,omitempty"`
	// GQA says how torch ran a GQA case: "native" (enable_gqa) or "expanded".
	GQA string `json:"gqa,omitempty"`
	// Kernel is the GPU kernel variant that ran.
	Kernel string `json:"kernel,omitempty"`
	// TBps (decode rows): the bytes of K and V one call must read
	// (Shape.KVBytes) over MS, in TB/s.
	TBps float64 `json:"tbps,omitempty"`
	// Kernel-ladder rows (goflash bench --ladder): what the driver made of
	// the kernel (flashattn.KernelStats: registers per thread, shared memory
	// per CTA, resident warps over the SM's most) and ErrUsed, the share of
	// the allowed error (attntest's 2x-baseline rule) its output used on the
	// check problem it passed before it was timed.
	Registers int     `json:"registers,omitempty"`
	SmemBytes int     `json:"smem_bytes,omitempty"`
	Occupancy float64 `json:"occupancy,omitempty"`
	ErrUsed   float64 `json:"err_used,omitempty"`
}

// KVBytes is what a decode call must read of the cache: every sequence's K
// and V rows, B * Nk * Hkv * D elements each, fp16.
func (s Shape) KVBytes() int64 { return 2 * 2 * int64(s.B) * int64(s.Nk) * int64(s.Hkv) * int64(s.D) }

// DecodeTBps is the achieved bandwidth of a decode call of shape s taking ms
// milliseconds: KVBytes over the time, in TB/s.
func DecodeTBps(s Shape, ms float64) float64 { return float64(s.KVBytes()) / (ms * 1e-3) / 1e12 }

// Key identifies the problem and direction of a row, across implementations.
func (r Row) Key() string {
	return fmt.Sprintf("%s|%d|%d|%d|%d|%d|%d|%t", r.Direction, r.B, r.Hq, r.Hkv, r.Nq, r.Nk, r.D, r.Causal)
}

// Meta describes where and when a result was produced.
type Meta struct {
	Date      string `json:"date"`   // UTC, RFC 3339
	Commit    string `json:"commit"` // source revision, "+dirty" when built from a modified tree
	GoVersion string `json:"go"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	// Partial marks a run stopped early (Ctrl-C, SIGTERM): the rows are the
	// cases finished before it, a note says how many of how many.
	Partial bool `json:"partial,omitempty"`
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
	DType      string `json:"dtype,omitempty"` // the inputs' element type it timed (fp16, bf16)
	Status     string `json:"status"`          // StatusOK, StatusSkipped or StatusError
	Reason     string `json:"reason,omitempty"`
	// Emulate is set when sdpa.py answered as PyTorch does on another GPU
	// ("sm75": flash and cudnn reported unsupported, as on a T4); the timings of the
	// other backends are still this device's.
	Emulate string `json:"emulate,omitempty"`
}

// Label names the PyTorch side for a table or chart: version, device and,
// when emulated, which GPU's answer was emulated.
func (t TorchMeta) Label() string {
	s := fmt.Sprintf("PyTorch %s on %s", t.Version, t.Device)
	if t.Emulate != "" {
		s += fmt.Sprintf(" (EMULATING %s: flash and cudnn reported unsupported as on that GPU; other backends timed on %s)", t.Emulate, t.Device)
	}
	return s
}

// Settings are the knobs of a benchmark run.
type Settings struct {
	Reps          int    `json:"reps"`
	Warmup        int    `json:"warmup"`
	Deterministic bool   `json:"deterministic"`
	Backend       string `json:"backend"`
	Direction     string `json:"direction"`
	// DType is the element type of the GPU lines' inputs and of PyTorch's:
	// "fp16", or "bf16" (--dtype).
	DType   string `json:"dtype"`
	Workers int    `json:"cpu_workers,omitempty"`
	// PageSize (decode): the paged cache's block size, 0 for contiguous;
	// PeakTBps the HBM bandwidth the decode rows are compared with (0: none given).
	PageSize int     `json:"page_size,omitempty"`
	PeakTBps float64 `json:"peak_tbps,omitempty"`
}

// Result is a whole benchmark run, as written to bench.json.
type Result struct {
	Schema   string      `json:"schema"`
	Meta     Meta        `json:"meta"`
	Device   DeviceMeta  `json:"device"`
	Torch    *TorchMeta  `json:"torch,omitempty"`
	Settings Settings    `json:"settings"`
	Notes    []string    `json:"notes,omitempty"`
	Rows     []Row       `json:"rows"`
	Table    []TableLine `json:"table,omitempty"`
}

// SortRows orders rows by head dim, causal, direction, sequence length,
// implementation: the order of the FA2 paper's tables.
func SortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case a.D != b.D:
			return a.D < b.D
		case a.Causal != b.Causal:
			return !a.Causal
		case a.Direction != b.Direction:
			return DirOrder(a.Direction) < DirOrder(b.Direction)
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

// DirOrder is the rank of a direction in tables: fwd, bwd, fwdbwd, decode.
func DirOrder(d string) int {
	switch d {
	case DirFwd:
		return 0
	case DirBwd:
		return 1
	case DirFwdBwd:
		return 2
	}
	return 3
}
