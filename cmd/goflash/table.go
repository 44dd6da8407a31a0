package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/goflash/goflash/bench"
)

// fmtTF prints a throughput: TFLOP/s with 3 significant digits, or the
// status of a cell that has no figure.
func fmtTF(c Cell) string {
	if c.Status != statusOK {
		if c.Status == bench.StatusAbsent {
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
	for _, impl := range bench.OtherImpls {
		if seen[impl] {
			others = append(others, impl)
		}
	}
	head := []string{"dir", "D", "causal", "N", "B", "H", "ours TFLOP/s"}
	for _, impl := range others {
		head = append(head, strings.TrimPrefix(impl, "goflash-"))
	}
	if hasTorch {
		for _, be := range bench.TorchBackends {
			head = append(head, "sdpa "+be)
		}
		head = append(head, "vs flash", "vs cudnn", "vs efficient")
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
			for _, be := range bench.TorchBackends {
				row = append(row, fmtTF(l.TorchCell(be)))
			}
			row = append(row, fmtRatio(l.VsFlash), fmtRatio(l.VsCuDNN), fmtRatio(l.VsEff))
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
// paste into an issue or a pull request.
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
			fmt.Fprintf(w, "- %s (CUDA %s), driver %s, via bench/sdpa.py\n", t.Label(), t.CUDA, t.Driver)
		} else {
			fmt.Fprintf(w, "- PyTorch comparison %s: %s\n", t.Status, t.Reason)
		}
	}
	s := res.Settings
	fmt.Fprintf(w, "- median of %d timed calls after %d warm-up calls; backend %s; deterministic %t; inputs %s\n", s.Reps, s.Warmup, s.Backend, s.Deterministic, orDefault(s.DType, "fp16"))
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
			fmt.Fprintf(w, "- %s %s %s: %s %s\n", r.Impl, r.Direction, caseOf(r), r.Status, r.Reason)
		}
	}
	return nil
}
