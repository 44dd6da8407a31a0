package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/goflash/goflash/flashattn"
)

// TableLine is one line of the side-by-side table: one problem and
// direction, GoFlash's figure and PyTorch's backends' figures.
type TableLine struct {
	Direction string  `json:"direction"`
	B         int     `json:"b"`
	Hq        int     `json:"hq"`
	Hkv       int     `json:"hkv"`
	Nq        int     `json:"nq"`
	Nk        int     `json:"nk"`
	D         int     `json:"d"`
	Causal    bool    `json:"causal"`
	Ours      Cell    `json:"ours"`               // the primary GoFlash implementation of the run
	Others    []Cell  `json:"others,omitempty"`   // other GoFlash implementations run (sm_75 path, CPU naive)
	Torch     []Cell  `json:"torch,omitempty"`    // flash, efficient, math
	VsFlash   float64 `json:"vs_flash,omitempty"` // ours / torch flash TFLOP/s
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

var torchBackends = []string{"flash", "efficient", "math"}

// otherImpls are shown beside the primary implementation, in this order.
var otherImpls = []string{implGPUSM75, implCPUFlash, implCPUNaive}

// buildTable joins the rows of one run: one line per (problem, direction),
// with GoFlash's primary implementation (GPU if it ran, else CPU flash) and
// every torch backend found.
func buildTable(rows []Row) []TableLine {
	byKey := map[string]map[string]Row{}
	var order []string
	for _, r := range rows {
		k := r.key()
		if byKey[k] == nil {
			byKey[k] = map[string]Row{}
			order = append(order, k)
		}
		byKey[k][r.Impl] = r
	}
	primary := implCPUFlash
	for _, r := range rows {
		if r.Impl == implGPU {
			primary = implGPU
			break
		}
		if r.Impl == implGPUSM75 {
			primary = implGPUSM75
		}
	}
	cell := func(r Row, ok bool, impl string) Cell {
		if !ok {
			return Cell{Impl: impl, Status: "absent"}
		}
		return Cell{Impl: impl, Status: r.Status, TFLOPs: r.TFLOPs, MS: r.MS, Extra: r.ExtraBytes}
	}
	var out []TableLine
	for _, k := range order {
		m := byKey[k]
		var any Row
		for _, r := range m {
			any = r
			break
		}
		ours, ok := m[primary]
		if !ok {
			continue // a torch-only problem (GoFlash did not run it)
		}
		l := TableLine{Direction: any.Direction, B: any.B, Hq: any.Hq, Hkv: any.Hkv, Nq: any.Nq, Nk: any.Nk, D: any.D, Causal: any.Causal,
			Ours: cell(ours, true, primary), OursExtra: ours.ExtraBytes}
		for _, impl := range otherImpls {
			if r, ok := m[impl]; ok && impl != primary {
				l.Others = append(l.Others, cell(r, true, impl))
			}
		}
		hasTorch := false
		for _, be := range torchBackends {
			if _, ok := m[implTorchPref+be]; ok {
				hasTorch = true
			}
		}
		if hasTorch {
			for _, be := range torchBackends {
				r, ok := m[implTorchPref+be]
				l.Torch = append(l.Torch, cell(r, ok, implTorchPref+be))
			}
			l.VsFlash = ratio(l.Ours, l.Torch[0])
			l.VsEff = ratio(l.Ours, l.Torch[1])
			l.VsMath = ratio(l.Ours, l.Torch[2])
		}
		out = append(out, l)
	}
	return out
}

func ratio(a, b Cell) float64 {
	if a.Status != statusOK || b.Status != statusOK || b.TFLOPs == 0 {
		return 0
	}
	return a.TFLOPs / b.TFLOPs
}

// fmtTF prints a throughput: TFLOP/s with 3 significant digits, or the
// status of a cell that has no figure.
func fmtTF(c Cell) string {
	if c.Status != statusOK {
		if c.Status == "absent" {
			return "-"
		}
		return c.Status
	}
	return fmtSig(c.TFLOPs)
}

func fmtSig(x float64) string {
	switch a := math.Abs(x); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", x)
	case a >= 10:
		return fmt.Sprintf("%.1f", x)
	case a >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

func fmtRatio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// tableColumns are the headings and cells of the table, shared by the
// terminal and Markdown renderings.
func tableColumns(lines []TableLine) ([]string, [][]string) {
	hasTorch := false
	var others []string // implementations with a column of their own
	seen := map[string]bool{}
	for _, l := range lines {
		hasTorch = hasTorch || l.Torch != nil
		for _, c := range l.Others {
			if !seen[c.Impl] {
				seen[c.Impl] = true
			}
		}
	}
	for _, impl := range otherImpls {
		if seen[impl] {
			others = append(others, impl)
		}
	}
	head := []string{"dir", "D", "causal", "N", "B", "H", "ours TFLOP/s"}
	for _, impl := range others {
		head = append(head, strings.TrimPrefix(impl, "goflash-"))
	}
	if hasTorch {
		head = append(head, "sdpa flash", "sdpa efficient", "sdpa math", "vs flash", "vs efficient")
	}
	head = append(head, "ours ms", "ours extra mem")
	var cells [][]string
	for _, l := range lines {
		n, h := fmt.Sprint(l.Nq), fmt.Sprint(l.Hq)
		if l.Nk != l.Nq {
			n += "/" + fmt.Sprint(l.Nk)
		}
		if l.Hkv != l.Hq {
			h += "/" + fmt.Sprint(l.Hkv)
		}
		c := map[bool]string{true: "yes", false: "no"}[l.Causal]
		row := []string{l.Direction, fmt.Sprint(l.D), c, n, fmt.Sprint(l.B), h, fmtTF(l.Ours)}
		for _, impl := range others {
			v := "-"
			for _, o := range l.Others {
				if o.Impl == impl {
					v = fmtTF(o)
				}
			}
			row = append(row, v)
		}
		if hasTorch {
			if l.Torch != nil {
				row = append(row, fmtTF(l.Torch[0]), fmtTF(l.Torch[1]), fmtTF(l.Torch[2]), fmtRatio(l.VsFlash), fmtRatio(l.VsEff))
			} else {
				row = append(row, "-", "-", "-", "-", "-")
			}
		}
		ms := "-"
		if l.Ours.Status == statusOK {
			ms = fmtSig(l.Ours.MS)
		}
		mem := "-"
		if l.OursExtra > 0 {
			mem = fmtBytes(l.OursExtra)
		}
		row = append(row, ms, mem)
		cells = append(cells, row)
	}
	return head, cells
}

// printTable writes the table for a terminal.
func printTable(w io.Writer, lines []TableLine) {
	head, cells := tableColumns(lines)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, c := range cells {
		fmt.Fprintln(tw, strings.Join(c, "\t")+"\t")
	}
	tw.Flush()
}

// writeMarkdown writes the run's metadata and table as Markdown, ready to
// paste into an issue or commit under bench/results.
func writeMarkdown(w io.Writer, res *BenchResult) error {
	fmt.Fprintf(w, "# goflash bench, %s\n\n", res.Meta.Date)
	fmt.Fprintf(w, "- device: %s", res.Device.Name)
	if res.Device.Capability != "" {
		fmt.Fprintf(w, " (sm_%s)", strings.ReplaceAll(res.Device.Capability, ".", ""))
	}
	if res.Device.Driver != "" {
		fmt.Fprintf(w, ", driver %s", res.Device.Driver)
	}
	fmt.Fprintf(w, "\n- commit: %s; %s %s/%s\n", res.Meta.Commit, res.Meta.GoVersion, res.Meta.OS, res.Meta.Arch)
	if t := res.Torch; t != nil {
		if t.Status == statusOK {
			fmt.Fprintf(w, "- PyTorch %s (CUDA %s) on %s, driver %s, via bench/sdpa.py\n", t.Version, t.CUDA, t.Device, t.Driver)
		} else {
			fmt.Fprintf(w, "- PyTorch comparison %s: %s\n", t.Status, t.Reason)
		}
	}
	s := res.Settings
	fmt.Fprintf(w, "- median of %d timed calls after %d warm-up calls; backend %s; deterministic %t\n", s.Reps, s.Warmup, s.Backend, s.Deterministic)
	fmt.Fprintf(w, "- TFLOP/s by the FA2 convention: forward 4·B·H·Nq·Nk·D (halved when causal), backward 2.5x, fwd+bwd 3.5x\n")
	for _, n := range res.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
	head, cells := tableColumns(res.Table)
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(head)))
	for _, c := range cells {
		fmt.Fprintf(w, "| %s |\n", strings.Join(c, " | "))
	}
	var bad []Row
	for _, r := range res.Rows {
		if r.Status != statusOK {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "\nNot run:\n\n")
		for _, r := range bad {
			fmt.Fprintf(w, "- %s %s %s: %s %s\n", r.Impl, r.Direction, r.caseOf(), r.Status, r.Reason)
		}
	}
	return nil
}

func dimsOf(r Row) flashattn.Dims {
	return flashattn.Dims{B: r.B, Nq: r.Nq, Nk: r.Nk, Hq: r.Hq, Hkv: r.Hkv, D: r.D}
}
