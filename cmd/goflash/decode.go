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

// benchDecode times one decode case on the GPU (flashattn's BenchKVCache),
// with mods' score modifiers; its TB/s counts the bytes the kernel reads
// (a window's entries, not the whole cache).
func (g *cudaGPU) benchDecode(c Case, row Row, mods scoreMods, warmup, reps int) Row {
	opts := &flashattn.Options{Causal: c.Causal}
	mods.apply(opts, c.Dims.Hq)
	r, err := g.dev.BenchKVCache(c.Dims, c.Page, opts, warmup, reps)
	if err != nil {
		return failed(row, err)
	}
	row.Status, row.MS, row.TFLOPs = statusOK, r.MedianMs, r.TFLOPS
	row.ExtraBytes, row.HostOverheadUS, row.Kernel = r.ExtraBytes, r.HostOverheadUs, r.Kernel.Symbol
	row.LaunchTimed = !r.EnqueueHidden
	row.TBps = r.TBps
	return row
}

// printDecodeBandwidth prints, for a --decode run, each shape's bandwidth:
// ours and the best PyTorch backend's, and our fraction of --peak-tbps.
func printDecodeBandwidth(w io.Writer, res *BenchResult) {
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
	if len(order) == 0 {
		return
	}
	peak := res.Settings.PeakTBps
	fmt.Fprintf(w, "\ndecode bandwidth: bytes of K and V read (B*Nk*Hkv*D*2*2) over the median time")
	if peak > 0 {
		fmt.Fprintf(w, "; fraction of %.2f TB/s (--peak-tbps)", peak)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "B\tHq/Hkv\tNq\tNk\tD\tKV MB\tours us\tours TB/s\tof peak\tbest SDPA\tSDPA us\tvs SDPA\t")
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
		fmt.Fprintf(tw, "%d\t%d/%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", o.B, o.Hq, o.Hkv, o.Nq, o.Nk, o.D,
			float64(o.KVBytes())/1e6, us, tb, frac, best, bestUS, vs)
		if m := l.mod; m.Impl != "" { // its MB: what it reads (a window's entries)
			us, tb, mb, frac := m.Status, "-", "-", "-"
			if m.Status == statusOK {
				us, tb, mb = fmtSig(1e3*m.MS), fmtSig(m.TBps), fmt.Sprintf("%.0f", m.TBps*m.MS*1e3)
				if peak > 0 {
					frac = fmt.Sprintf("%.0f%%", 100*m.TBps/peak)
				}
			}
			fmt.Fprintf(tw, "%s\t\t\t\t\t\t%s\t%s\t%s\t%s\t\t\t\t\n", strings.TrimPrefix(implGPUMod, "goflash-"), mb, us, tb, frac)
		}
	}
	tw.Flush()
}
