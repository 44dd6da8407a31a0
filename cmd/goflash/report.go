package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/viz"
)

// benchReport builds the HTML report of a run: what ran where, the table,
// and per (direction, head dim, mask) a throughput chart and, with PyTorch,
// a speedup chart over SDPA's flash backend, or its memory-efficient one
// where flash did not run (a T4), named in the chart's title.
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
		fmt.Fprintf(&b, "\n\n%s (CUDA %s): scaled_dot_product_attention, fp16, each backend forced with sdpa_kernel, timed the same way by bench/sdpa.py.", t.Label(), t.CUDA)
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
	rows := map[group][]Row{}
	for _, r := range res.Rows {
		g := group{r.Direction, r.D, r.Causal}
		if _, ok := rows[g]; !ok {
			order = append(order, g)
		}
		rows[g] = append(rows[g], r)
	}
	sort.SliceStable(order, func(i, j int) bool { return bench.DirOrder(order[i].dir) < bench.DirOrder(order[j].dir) })
	dirName := map[string]string{dirFwd: "forward", dirBwd: "backward", dirFwdBwd: "forward + backward"}
	sub := res.Device.Name
	if t := res.Torch; t != nil && t.Status == statusOK {
		sub += " vs PyTorch " + t.Version
		if t.Emulate != "" {
			sub += " (REHEARSAL: PyTorch answering as on " + t.Emulate + ")"
		}
	}
	// Decode: one table of bandwidths (its points share one query row, N 1,
	// so a throughput chart over N would stack every cache length on one x).
	if caption, head, cells := decodeBandwidth(res); len(cells) > 0 {
		rep.AddHeading("Decode bandwidth")
		rep.AddText(caption + ".")
		rep.AddTable(head, cells)
	}
	for _, g := range order {
		if g.dir == dirDecode {
			continue
		}
		ps := viz.SpeedPoints(rows[g], nil)
		if len(ps) == 0 {
			continue
		}
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
		if base, ok := bench.ChooseBaseline(rows[g]); ok && len(ps) > 1 {
			c, err := viz.Speedup(ps, base.Series, viz.SpeedOptions{Title: "Speedup over " + base.Label + ": " + title, Subtitle: sub})
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
		mem[r.D] = append(mem[r.D], viz.MemPoint{Backend: bench.SeriesName(r.Impl), N: r.Nq, Bytes: float64(r.ExtraBytes)})
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

func writeBenchHTML(path string, res *BenchResult) error {
	rep, err := benchReport(res)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, func(w io.Writer) error { _, err := rep.WriteTo(w); return err })
}
