package bench

import "fmt"

// Series names: one per backend, the same in every chart, table and
// summary. viz gives each a fixed colour; other names get palette colours.
const (
	SeriesCPUNaive      = "cpu-naive"
	SeriesCPUFlash      = "cpu-flash"
	SeriesGPUFlash      = "gpu-flash"
	SeriesSDPAFlash     = "sdpa-flash"     // PyTorch scaled_dot_product_attention, flash backend
	SeriesSDPACuDNN     = "sdpa-cudnn"     // PyTorch SDPA, cuDNN backend
	SeriesSDPAEfficient = "sdpa-efficient" // PyTorch SDPA, memory-efficient backend
	SeriesSDPAMath      = "sdpa-math"      // PyTorch SDPA, math backend
)

// SeriesName maps a row's implementation to its series name; an
// implementation without one is its own name.
func SeriesName(impl string) string {
	switch impl {
	case ImplGPU:
		return SeriesGPUFlash
	case ImplGPUSM75:
		return SeriesGPUFlash + " (sm_75 path)"
	case ImplGPUSM80:
		return SeriesGPUFlash + " (sm_80 path)"
	case ImplGPUDet:
		return SeriesGPUFlash + " (deterministic)"
	case ImplCPUFlash:
		return SeriesCPUFlash
	case ImplCPUNaive:
		return SeriesCPUNaive
	case ImplTorchPref + "flash":
		return SeriesSDPAFlash
	case ImplTorchPref + "cudnn":
		return SeriesSDPACuDNN
	case ImplTorchPref + "efficient":
		return SeriesSDPAEfficient
	case ImplTorchPref + "math":
		return SeriesSDPAMath
	}
	return impl
}

// BaselineOrder is the preference of PyTorch backends as the baseline of a
// speedup: flash where PyTorch runs it (sm_80 and newer), else
// memory-efficient, which is what PyTorch runs on a T4 (sm_75).
var BaselineOrder = []string{"flash", "efficient"}

// Baseline is the PyTorch backend that speedups are measured against.
type Baseline struct {
	Impl   string // "torch-flash" or "torch-efficient"
	Series string // its series name (SeriesName)
	// Label names it for a title or a table note, and says why when it is
	// not flash ("PyTorch SDPA memory-efficient (flash unsupported: ...)").
	Label string
}

// ChooseBaseline picks the first backend of BaselineOrder with a row that
// ran among rows; ok is false when none did.
func ChooseBaseline(rows []Row) (b Baseline, ok bool) {
	why := ""
	for _, be := range BaselineOrder {
		impl := ImplTorchPref + be
		ran, reason := false, ""
		for _, r := range rows {
			if r.Impl != impl {
				continue
			}
			if r.Status == StatusOK && r.TFLOPs > 0 {
				ran = true
				break
			}
			if reason == "" {
				reason = r.Status
				if r.Reason != "" {
					reason += ": " + r.Reason
				}
			}
		}
		if ran {
			label := "PyTorch SDPA " + map[string]string{"flash": "flash", "efficient": "memory-efficient"}[be]
			if why != "" {
				label += " (" + why + ")"
			}
			return Baseline{Impl: impl, Series: SeriesName(impl), Label: label}, true
		}
		if why == "" {
			if reason == "" {
				reason = "not run"
			}
			why = fmt.Sprintf("%s %s", be, reason)
		}
	}
	return Baseline{}, false
}

// TorchSummary says, per PyTorch backend in rows, how many of its rows ran
// and, when some did not, the first reason: one line each, for a notebook
// or a log.
func TorchSummary(rows []Row) []string {
	var out []string
	for _, be := range TorchBackends {
		impl := ImplTorchPref + be
		n, ran, why := 0, 0, ""
		for _, r := range rows {
			if r.Impl != impl {
				continue
			}
			n++
			if r.Status == StatusOK {
				ran++
			} else if why == "" {
				why = r.Status
				if r.Reason != "" {
					why += ": " + r.Reason
				}
			}
		}
		if n == 0 {
			continue
		}
		line := fmt.Sprintf("%s: %d of %d ran", SeriesName(impl), ran, n)
		if why != "" {
			line += "; " + why
		}
		out = append(out, line)
	}
	return out
}
