package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/goflash/goflash/flashattn"
)

// varlenRun is one --varlen measurement: a head dim and mask over the batch
// of --varlen lengths, packed and padded.
type varlenRun struct {
	D      int          `json:"d"`
	Hq     int          `json:"hq"`
	Hkv    int          `json:"hkv"`
	Causal bool         `json:"causal"`
	Result varlenResult `json:"result"`
}

// varlenResult is the timing of one batch of sequences, packed (the varlen
// op) and padded to the longest (the dense op on (Seqs, max length, H,
// D)). The TFLOPS of both count the real tokens only: the sum over
// sequences of Dims.FLOPs (BackwardFLOPs) of each alone.
type varlenResult struct {
	Lens           []int
	Varlen, Padded flashattn.BenchResult
	// PaddedAllTFLOPS is the padded call's rate counting the padding's
	// FLOPs too (Dims.FLOPs of the padded batch): its kernel's own rate.
	PaddedAllTFLOPS float64
	// VarlenBytes and PaddedBytes are the device memory of one call: q, k,
	// v, O and its ExtraBytes (the LSE; varlen: and the cumulative
	// lengths); for the backward q, k, v, O, the LSE, dO, dQ, dK, dV and its
	// ExtraBytes (Di, the single pass's dQ accumulator; varlen: the
	// cumulative lengths).
	VarlenBytes, PaddedBytes int64
}

// benchVarlen times the fp16 batch of lens (each its own Nq = Nk) with hq,
// hkv heads of head dim dh, packed (op: OpVarlenForward or
// OpVarlenBackward) and padded to its longest sequence (OpForward,
// OpBackward), o applying to both.
func benchVarlen(dev *flashattn.Device, op flashattn.Op, lens []int, hq, hkv, dh int, o *flashattn.Options, warmup, reps int) (varlenResult, error) {
	cu := []int{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	total, longest := cu[len(lens)], slices.Max(lens)
	cfg := flashattn.BenchConfig{Warmup: warmup, Reps: reps}
	packedCfg := cfg
	packedCfg.Varlen = flashattn.Varlen{CuSeqlensQ: cu, CuSeqlensK: cu}
	packed, err := dev.Bench(op, flashattn.Dims{B: 1, Nq: total, Nk: total, Hq: hq, Hkv: hkv, D: dh}, flashattn.FP16, o, packedCfg)
	if err != nil {
		return varlenResult{}, err
	}
	dense := flashattn.OpForward
	if op == flashattn.OpVarlenBackward {
		dense = flashattn.OpBackward
	}
	padded, err := dev.Bench(dense, flashattn.Dims{B: len(lens), Nq: longest, Nk: longest, Hq: hq, Hkv: hkv, D: dh}, flashattn.FP16, o, cfg)
	if err != nil {
		return varlenResult{}, err
	}
	return compareVarlen(lens, packed, padded), nil
}

// compareVarlen is the result of a packed call and the padded one of the
// same batch: the padded call's rate counted on the packed call's FLOPs
// (the real tokens'), and each call's device memory.
func compareVarlen(lens []int, packed, padded flashattn.BenchResult) varlenResult {
	r := varlenResult{Lens: lens, Varlen: packed, Padded: padded, PaddedAllTFLOPS: padded.TFLOPS}
	flops := packed.TFLOPS * packed.MedianMs * 1e9 // TFLOPS is FLOPs over the median time
	r.Padded.TFLOPS = flops / (padded.MedianMs * 1e-3) / 1e12
	r.Padded.PeakTFLOPS = flops / (padded.MinMs * 1e-3) / 1e12
	r.VarlenBytes, r.PaddedBytes = callBytes(packed), callBytes(padded)
	return r
}

// callBytes is the device memory of one fp16 call r timed: q, k, v, O and
// its ExtraBytes, and for a backward the forward's LSE, dO, dQ, dK and dV
// too.
func callBytes(r flashattn.BenchResult) int64 {
	dm := r.Dims
	tensors := int64(flashattn.FP16.Size()) * int64(2*dm.QShape().Numel()+2*dm.KVShape().Numel())
	n := tensors + r.ExtraBytes
	if r.Backward {
		n += int64(dm.LSEBytes()) + tensors
	}
	return n
}

// runVarlenBench is goflash bench --varlen: for each --headdims and
// --causal, the varlen forward (--direction bwd: backward) on the packed
// batch, with --window/--softcap/--alibi if set, beside the plain one on
// the batch padded to its longest sequence,
// both on the GPU, TFLOP/s counted on the real tokens only, and each call's
// device memory.
func runVarlenBench(o benchOpts, stdout io.Writer) error {
	var lens intList
	if err := lens.Set(o.varlen); err != nil || len(lens) == 0 || slices.Min(lens) < 1 {
		return usagef("--varlen %q: want comma-separated sequence lengths, each >= 1", o.varlen)
	}
	if o.decode || (o.direction != "fwd" && o.direction != "bwd") || o.compareTorch || o.shapes.seqLens != nil || o.shapes.kvLen != 0 {
		return usagef("--varlen times the forward (or with --direction bwd the backward) on its own lengths: drop --decode, --compare-torch, --seqlens and --kv-len")
	}
	if o.out != "" || (o.backend != "auto" && o.backend != "gpu") {
		return usagef("--varlen times the GPU and prints its table (or --json), writing no files: drop --out and --backend %s", o.backend)
	}
	if o.reps < 0 || o.warmup < -1 {
		return usagef("--reps and --warmup must not be negative")
	}
	g, err := openGPU(o.device)
	if err != nil {
		return usagef("--varlen times the GPU kernels and needs a GPU (%v)", err)
	}
	defer g.Close()
	cg, ok := g.(*cudaGPU)
	if !ok {
		return usagef("--varlen needs a CUDA device")
	}
	if err := cg.Use(o.forceArch); err != nil {
		return err
	}
	op, what := flashattn.OpVarlenForward, "forward"
	if o.direction == "bwd" {
		op, what = flashattn.OpVarlenBackward, "backward"
	}
	reps, warmup := o.reps, o.warmup
	if reps == 0 {
		reps = 20
	}
	if warmup < 0 {
		warmup = 5
	}
	dims, causal := o.shapes.headDims, o.shapes.causal
	if dims == nil {
		dims = intList{64, 128}
	}
	if len(causal) == 0 {
		causal = causalFlag{false, true}
	}
	// Ctrl-C stops between calls: the runs finished before it are printed,
	// marked partial (one call is short and not cancellable once queued).
	ctx, stop := interruptContext(context.Background())
	defer stop()
	meta := newMeta()
	var runs []varlenRun
	for _, d := range dims {
		hq := o.shapes.heads
		if hq == 0 {
			hq = o.shapes.hidden / d
		}
		hkv := o.shapes.kvHeads
		if hkv == 0 {
			hkv = hq
		}
		for _, c := range causal {
			if ctx.Err() != nil {
				meta.Partial = true
				break
			}
			opts := &flashattn.Options{Causal: c, Deterministic: o.deterministic}
			o.mods.apply(opts, hq) // --window/--softcap/--alibi: on both calls (the padded one's window on the padded lengths)
			r, err := benchVarlen(cg.dev, op, lens, hq, hkv, d, opts, warmup, reps)
			if err != nil {
				return fmt.Errorf("--varlen D %d causal %v: %w", d, c, err)
			}
			runs = append(runs, varlenRun{D: d, Hq: hq, Hkv: hkv, Causal: c, Result: r})
		}
	}
	if err := printVarlen(stdout, o, meta, g.Meta(), lens, what, reps, warmup, runs); err != nil {
		return err
	}
	if meta.Partial {
		return fmt.Errorf("%w: the runs finished before it are printed above, marked partial", errInterrupted)
	}
	return nil
}

// printVarlen prints runVarlenBench's runs as a table, or with --json as one
// document with the date, commit and device.
func printVarlen(stdout io.Writer, o benchOpts, meta Meta, dev DeviceMeta, lens intList, what string, reps, warmup int, runs []varlenRun) error {
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Meta   Meta        `json:"meta"`
			Device DeviceMeta  `json:"device"`
			Reps   int         `json:"reps"`
			Warmup int         `json:"warmup"`
			Runs   []varlenRun `json:"runs"`
		}{meta, dev, reps, warmup, runs})
	}
	total := 0
	for _, n := range lens {
		total += n
	}
	partial := ""
	if meta.Partial {
		partial = " (PARTIAL: interrupted)"
	}
	fmt.Fprintf(stdout, "varlen %s on %s (%s, commit %s)%s: %d sequences, %d tokens (lengths %d..%d), median of %d calls\n",
		what, dev.Name, meta.Date, meta.Commit, partial, len(lens), total, slices.Min(lens), slices.Max(lens), reps)
	fmt.Fprintln(stdout, "TFLOP/s count the real tokens only (each sequence alone) for both lines (padded, all tokens: the padded call's own rate);")
	if o.direction == "bwd" {
		fmt.Fprintln(stdout, "memory: q, k, v, O, LSE, dO, dQ, dK, dV, Di (the single pass: its dQ accumulator; varlen: the lengths) of one call")
	} else {
		fmt.Fprintln(stdout, "memory: q, k, v, O, LSE (and the lengths) of one call")
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "D\tHq/Hkv\tcausal\tcall\tms\tTFLOP/s\tpadded, all tokens\tmemory MB\tkernel\tvarlen/padded\t")
	for _, r := range runs {
		v, p := r.Result.Varlen, r.Result.Padded
		fmt.Fprintf(tw, "%d\t%d/%d\t%v\tvarlen\t%.3f\t%.1f\t-\t%.1f\t%s\t%.3fx TFLOP/s (%.3fx all tokens)\t\n", r.D, r.Hq, r.Hkv, r.Causal,
			v.MedianMs, v.TFLOPS, float64(r.Result.VarlenBytes)/1e6, v.Kernel.Symbol, v.TFLOPS/p.TFLOPS, v.TFLOPS/r.Result.PaddedAllTFLOPS)
		fmt.Fprintf(tw, "%d\t%d/%d\t%v\tpadded\t%.3f\t%.1f\t%.1f\t%.1f\t%s\t%.3fx memory\t\n", r.D, r.Hq, r.Hkv, r.Causal,
			p.MedianMs, p.TFLOPS, r.Result.PaddedAllTFLOPS, float64(r.Result.PaddedBytes)/1e6, p.Kernel.Symbol,
			float64(r.Result.VarlenBytes)/float64(r.Result.PaddedBytes))
	}
	return tw.Flush()
}
