package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/goflash/goflash/viz"
)

// vizName maps a row's implementation to the series names (and colours)
// that viz uses everywhere.
func vizName(impl string) string {
	switch impl {
	case implGPU:
		return viz.GPUFlash
	case implGPUSM75:
		return viz.GPUFlash + " (sm_75 path)"
	case implCPUFlash:
		return viz.CPUFlash
	case implCPUNaive:
		return viz.CPUNaive
	case implTorchPref + "flash":
		return viz.SDPAFlash
	case implTorchPref + "efficient":
		return viz.SDPAEfficient
	case implTorchPref + "math":
		return viz.SDPAMath
	}
	return impl
}

// benchReport builds the HTML report of a run: what ran where, the table,
// and per (direction, head dim, mask) a throughput chart and, with PyTorch,
// a speedup chart over SDPA's flash backend.
func benchReport(res *BenchResult) (*viz.Report, error) {
	rep := viz.NewReport("GoFlash benchmark")
	var b strings.Builder
	fmt.Fprintf(&b, "Device: %s", res.Device.Name)
	if res.Device.Capability != "" {
		fmt.Fprintf(&b, ", compute capability %s", res.Device.Capability)
	}
	if res.Device.Driver != "" {
		fmt.Fprintf(&b, ", driver %s", res.Device.Driver)
	}
	fmt.Fprintf(&b, ". Commit %s, %s, %s. Median of %d timed calls after %d warm-up calls", res.Meta.Commit, res.Meta.GoVersion, res.Meta.Date, res.Settings.Reps, res.Settings.Warmup)
	if res.Device.Kind == "gpu" {
		b.WriteString(" (CUDA events)")
	} else {
		b.WriteString(" (wall clock)")
	}
	b.WriteString(". TFLOP/s by the FA2 paper's convention: forward 4·B·H·Nq·Nk·D, halved when causal; backward 2.5x, forward+backward 3.5x.")
	if t := res.Torch; t != nil && t.Status == statusOK {
		fmt.Fprintf(&b, "\n\nPyTorch %s (CUDA %s) scaled_dot_product_attention on %s, fp16, each backend forced with sdpa_kernel, timed the same way by bench/sdpa.py.", t.Version, t.CUDA, t.Device)
	}
	for _, n := range res.Notes {
		b.WriteString("\n\nNote: " + n)
	}
	rep.AddText(b.String())

	head, cells := tableColumns(res.Table)
	rep.AddHeading("Results")
	rep.AddTable(head, cells)

	// Charts per (direction, D, causal), in table order.
	type group struct {
		dir    string
		d      int
		causal bool
	}
	var order []group
	points := map[group][]viz.SpeedPoint{}
	for _, r := range res.Rows {
		if r.Status != statusOK || r.TFLOPs <= 0 {
			continue
		}
		g := group{r.Direction, r.D, r.Causal}
		if _, ok := points[g]; !ok {
			order = append(order, g)
		}
		points[g] = append(points[g], viz.SpeedPoint{Backend: vizName(r.Impl), B: r.B, N: r.Nq, H: r.Hq, D: r.D, Causal: r.Causal,
			Millis: r.MS, TFLOPs: r.TFLOPs})
	}
	sort.SliceStable(order, func(i, j int) bool { return dirOrder(order[i].dir) < dirOrder(order[j].dir) })
	dirName := map[string]string{dirFwd: "forward", dirBwd: "backward", dirFwdBwd: "forward + backward"}
	sub := res.Device.Name
	if res.Torch != nil && res.Torch.Status == statusOK {
		sub += " vs PyTorch " + res.Torch.Version
	}
	for _, g := range order {
		ps := points[g]
		mask := "not causal"
		if g.causal {
			mask = "causal"
		}
		title := fmt.Sprintf("%s, D = %d, %s", dirName[g.dir], g.d, mask)
		rep.AddHeading(strings.ToUpper(title[:1]) + title[1:])
		c, err := viz.Speed(ps, viz.SpeedOptions{Title: "Throughput: " + title, Subtitle: sub})
		if err != nil {
			return nil, err
		}
		rep.AddChart(c)
		if hasBackend(ps, viz.SDPAFlash) && len(ps) > 1 {
			c, err := viz.Speedup(ps, viz.SDPAFlash, viz.SpeedOptions{Title: "Speedup over PyTorch SDPA flash: " + title, Subtitle: sub})
			if err == nil {
				rep.AddChart(c)
			}
		}
	}
	// Memory of a forward call, per head dim (not causal): measured only,
	// since B and H change with N in the default sweep.
	var dims []int
	mem := map[int][]viz.MemPoint{}
	for _, r := range res.Rows {
		if r.Direction != dirFwd || r.Causal || r.Status != statusOK || r.ExtraBytes <= 0 {
			continue
		}
		if _, ok := mem[r.D]; !ok {
			dims = append(dims, r.D)
		}
		mem[r.D] = append(mem[r.D], viz.MemPoint{Backend: vizName(r.Impl), N: r.Nq, Bytes: float64(r.ExtraBytes)})
	}
	for _, d := range dims {
		what := "device bytes beyond inputs and outputs (GoFlash: the LSE; PyTorch: peak allocation during the call minus outputs)"
		if res.Device.Kind == "cpu" {
			what = "Go heap bytes allocated by the call, outputs included"
		}
		rep.AddHeading(fmt.Sprintf("Memory of a forward call, D = %d, not causal", d))
		rep.AddText("Measured " + what + ", at the shapes of the table (B and H as listed there).")
		c, err := viz.Memory(mem[d], viz.MemoryOptions{Title: fmt.Sprintf("Extra memory of one forward call, D = %d", d)})
		if err != nil {
			return nil, err
		}
		rep.AddChart(c)
	}
	return rep, nil
}

func hasBackend(ps []viz.SpeedPoint, name string) bool {
	for _, p := range ps {
		if p.Backend == name {
			return true
		}
	}
	return false
}

func writeBenchHTML(path string, res *BenchResult) error {
	rep, err := benchReport(res)
	if err != nil {
		return err
	}
	return rep.WriteFile(path)
}
