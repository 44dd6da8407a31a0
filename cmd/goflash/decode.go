package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
)

const dirDecode = bench.DirDecode

// decodeSeqLens are --decode's default cache lengths: the range,
// from where launch latency dominates (1k) to where only bandwidth counts.
var decodeSeqLens = intList{1024, 4096, 16384, 32768, 65536, 131072}

// decodePlanOpts checks --decode's flags and fills the shapes they leave
// open with a Llama-like decode step: B 1, 32 query heads over 8 kv heads,
// D 128, no mask (with one new row, causal changes nothing).
func decodePlanOpts(o *benchOpts) error {
	if o.direction != dirFwd && o.direction != dirDecode {
		return usagef("--decode times one direction (decode): drop --direction %s", o.direction)
	}
	if o.nq < 1 {
		return usagef("--nq %d: want >= 1", o.nq)
	}
	if o.page < 0 || o.page%flashattn.PageMultiple != 0 {
		return usagef("--page %d: want 0 (contiguous) or a multiple of %d", o.page, flashattn.PageMultiple)
	}
	if o.peakTBps < 0 {
		return usagef("--peak-tbps %g: want >= 0", o.peakTBps)
	}
	o.direction = dirDecode
	s := &o.shapes
	if s.kvLen != 0 {
		return usagef("--decode takes the cache lengths from --seqlens, not --kv-len")
	}
	if s.seqLens == nil {
		s.seqLens = decodeSeqLens
	}
	for _, n := range s.seqLens {
		if o.page > 0 && n%o.page != 0 {
			return usagef("--page %d does not divide the cache length %d", o.page, n)
		}
	}
	if s.headDims == nil {
		s.headDims = intList{128}
	}
	if s.batch == 0 {
		s.batch = 1
	}
	if s.heads == 0 {
		s.heads = 32
		if s.kvHeads == 0 {
			s.kvHeads = 8
		}
	}
	if len(s.causal) == 0 {
		s.causal = causalFlag{false}
	}
	return nil
}

// benchDecode times one decode case on the GPU (flashattn's Bench of OpKVCache),
// with mods' score modifiers; its TB/s counts the bytes the kernel reads
// (a window's entries, not the whole cache).
func (g *cudaGPU) benchDecode(c Case, row Row, mods scoreMods, warmup, reps int) Row {
	opts := &flashattn.Options{Causal: c.Causal}
	mods.apply(opts, c.Dims.Hq)
	r, err := g.dev.Bench(flashattn.OpKVCache, c.Dims, flashattn.FP16, opts, flashattn.BenchConfig{Warmup: warmup, Reps: reps, PageSize: c.Page})
	if err != nil {
		return failed(row, err)
	}
	row.Status, row.MS, row.TFLOPs = statusOK, r.MedianMs, r.TFLOPS
	row.ExtraBytes, row.HostOverheadUS, row.Kernel = r.ExtraBytes, r.HostOverheadUs, r.Kernel.Symbol
	row.LaunchTimed = !r.EnqueueHidden
	row.TBps = r.TBps
	return row
}

// decodeBandwidth is, for a --decode run, each shape's bandwidth: the bytes
// of K and V read over the median time, the fraction of --peak-tbps, and
// the fastest SDPA backend's time beside ours; the terminal and the HTML
// report show it. caption says what the columns mean; no rows: no decode.
func decodeBandwidth(res *BenchResult) (caption string, head []string, rows [][]string) {
	type line struct {
		ours, mod Row // mod: the --window/--softcap/--alibi call
		torch     map[string]Row
	}
	var order []string
	lines := map[string]*line{}
	for _, r := range res.Rows {
		if r.Direction != dirDecode {
			continue
		}
		k := r.Key()
		if lines[k] == nil {
			lines[k] = &line{torch: map[string]Row{}}
			order = append(order, k)
		}
		if rank := bench.PrimaryRank(r.Impl); rank > 0 { // "ours": the table's primary line
			if rank > bench.PrimaryRank(lines[k].ours.Impl) {
				lines[k].ours = r
			}
		} else if r.Impl == implGPUMod {
			lines[k].mod = r
		} else if r.Status == statusOK && strings.HasPrefix(r.Impl, implTorchPref) {
			lines[k].torch[r.Impl] = r
		}
	}
	peak := res.Settings.PeakTBps
	caption = "decode bandwidth: bytes of K and V read (B*Nk*Hkv*D*2*2) over the median time"
	if peak > 0 {
		caption += fmt.Sprintf("; fraction of %.2f TB/s (--peak-tbps)", peak)
	}
	head = []string{"B", "Hq/Hkv", "Nq", "Nk", "D", "KV MB", "ours us", "ours TB/s", "of peak", "best SDPA", "SDPA us", "vs SDPA"}
	for _, k := range order {
		l := lines[k]
		o := l.ours
		if o.Impl == "" {
			continue
		}
		frac, best, bestUS, vs := "-", "-", "-", "-"
		var b Row
		for _, t := range l.torch {
			if b.Impl == "" || t.MS < b.MS {
				b = t
			}
		}
		if b.Impl != "" {
			best, bestUS = b.Impl, fmtSig(1e3*b.MS)
		}
		us, tb := o.Status, "-"
		if o.Status == statusOK {
			us, tb = fmtSig(1e3*o.MS), fmtSig(o.TBps)
			if peak > 0 {
				frac = fmt.Sprintf("%.0f%%", 100*o.TBps/peak)
			}
			if b.Impl != "" {
				vs = fmtRatio(b.MS / o.MS)
			}
		}
		rows = append(rows, []string{fmt.Sprint(o.B), fmt.Sprintf("%d/%d", o.Hq, o.Hkv), fmt.Sprint(o.Nq), fmt.Sprint(o.Nk), fmt.Sprint(o.D),
			fmt.Sprintf("%.0f", float64(o.KVBytes())/1e6), us, tb, frac, best, bestUS, vs})
		if m := l.mod; m.Impl != "" { // its MB: what it reads (a window's entries)
			us, tb, mb, frac := m.Status, "-", "-", "-"
			if m.Status == statusOK {
				us, tb, mb = fmtSig(1e3*m.MS), fmtSig(m.TBps), fmt.Sprintf("%.0f", m.TBps*m.MS*1e3)
				if peak > 0 {
					frac = fmt.Sprintf("%.0f%%", 100*m.TBps/peak)
				}
			}
			rows = append(rows, []string{strings.TrimPrefix(implGPUMod, "goflash-"), "", "", "", "", mb, us, tb, frac, "", "", ""})
		}
	}
	return caption, head, rows
}

// printDecodeBandwidth prints decodeBandwidth's table (nothing without decode rows).
func printDecodeBandwidth(w io.Writer, res *BenchResult) {
	caption, head, rows := decodeBandwidth(res)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n", caption)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range append([][]string{head}, rows...) {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}
