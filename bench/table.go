package bench

// TableLine is one line of the side-by-side table: one problem and
// direction, GoFlash's figure and PyTorch's backends' figures.
type TableLine struct {
	Direction string  `json:"direction"`
	Shape             // the problem (its fields are the line's JSON fields)
	Ours      Cell    `json:"ours"`               // the primary GoFlash implementation of the run
	Others    []Cell  `json:"others,omitempty"`   // other GoFlash implementations run (sm_75 or sm_80 path, CPU naive)
	Torch     []Cell  `json:"torch,omitempty"`    // one per TorchBackends, in that order
	VsFlash   float64 `json:"vs_flash,omitempty"` // ours / torch flash TFLOP/s
	VsCuDNN   float64 `json:"vs_cudnn,omitempty"`
	VsEff     float64 `json:"vs_efficient,omitempty"`
	VsMath    float64 `json:"vs_math,omitempty"`
	OursExtra int64   `json:"ours_extra_bytes,omitempty"`
}

// Cell is one implementation's figure in the table.
type Cell struct {
	Impl   string  `json:"impl"`
	Status string  `json:"status"`
	TFLOPs float64 `json:"tflops,omitempty"`
	MS     float64 `json:"ms,omitempty"`
	Extra  int64   `json:"extra_bytes,omitempty"`
}

// StatusAbsent marks a table cell of an implementation that has no row.
const StatusAbsent = "absent"

// OtherImpls are shown beside the primary implementation, in this order.
var OtherImpls = []string{ImplGPUDet, ImplGPUMod, ImplGPUSM75, ImplGPUSM80, ImplCPUFlash, ImplCPUNaive,
	ImplRung(1), ImplRung(2), ImplRung(3), ImplRung(4), ImplRungEdit}

// primaryRank orders the implementations that can be a run's primary one
// (the GPU line; under --force-arch the forced path's): the higher ranks
// first, CPU flash (rank 0) where none ran.
var primaryRank = map[string]int{ImplGPU: 3, ImplGPUSM80: 2, ImplGPUSM75: 1}

// PrimaryRank is impl's rank as a run's primary GoFlash line (BuildTable's
// choice): the default GPU path's 3, the forced sm_80 path's 2, the forced
// sm_75 path's 1, any other 0.
func PrimaryRank(impl string) int { return primaryRank[impl] }

// BuildTable joins the rows of one run: one line per (problem, direction),
// with GoFlash's primary implementation (GPU if it ran, else the forced
// sm_80 path, else the forced sm_75 path, else CPU flash) and every torch
// backend found.
func BuildTable(rows []Row) []TableLine {
	byKey := map[string]map[string]Row{}
	var order []string
	for _, r := range rows {
		k := r.Key()
		if byKey[k] == nil {
			byKey[k] = map[string]Row{}
			order = append(order, k)
		}
		byKey[k][r.Impl] = r
	}
	primary, rank := ImplCPUFlash, 0
	for _, r := range rows {
		if k := primaryRank[r.Impl]; k > rank {
			primary, rank = r.Impl, k
		}
	}
	cell := func(r Row, ok bool, impl string) Cell {
		if !ok {
			return Cell{Impl: impl, Status: StatusAbsent}
		}
		return Cell{Impl: impl, Status: r.Status, TFLOPs: r.TFLOPs, MS: r.MS, Extra: r.ExtraBytes}
	}
	var out []TableLine
	for _, k := range order {
		m := byKey[k]
		ours, ok := m[primary]
		if !ok {
			continue // a torch-only problem (GoFlash did not run it)
		}
		l := TableLine{Direction: ours.Direction, Shape: ours.Shape,
			Ours: cell(ours, true, primary), OursExtra: ours.ExtraBytes}
		for _, impl := range OtherImpls {
			if r, ok := m[impl]; ok && impl != primary {
				l.Others = append(l.Others, cell(r, true, impl))
			}
		}
		hasTorch := false
		for _, be := range TorchBackends {
			if _, ok := m[ImplTorchPref+be]; ok {
				hasTorch = true
			}
		}
		if hasTorch {
			for _, be := range TorchBackends {
				r, ok := m[ImplTorchPref+be]
				l.Torch = append(l.Torch, cell(r, ok, ImplTorchPref+be))
			}
			l.VsFlash = Ratio(l.Ours, l.TorchCell("flash"))
			l.VsCuDNN = Ratio(l.Ours, l.TorchCell("cudnn"))
			l.VsEff = Ratio(l.Ours, l.TorchCell("efficient"))
			l.VsMath = Ratio(l.Ours, l.TorchCell("math"))
		}
		out = append(out, l)
	}
	return out
}

// TorchCell is the cell of the PyTorch backend be (a TorchBackends name);
// absent when the line has none.
func (l TableLine) TorchCell(be string) Cell {
	for _, c := range l.Torch {
		if c.Impl == ImplTorchPref+be {
			return c
		}
	}
	return Cell{Impl: ImplTorchPref + be, Status: StatusAbsent}
}

// Ratio is a's TFLOP/s over b's, or 0 when either did not run.
func Ratio(a, b Cell) float64 {
	if a.Status != StatusOK || b.Status != StatusOK || b.TFLOPs == 0 {
		return 0
	}
	return a.TFLOPs / b.TFLOPs
}
