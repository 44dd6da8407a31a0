package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/internal/stats"
)

const benchSynopsis = `Time GoFlash's attention over a sweep of shapes and write JSON, CSV, Markdown
and an HTML report into --out. With a usable GPU the default sweep is the FA2
paper's (16k tokens per batch: B = tokens/N; hidden 2048: H = hidden/D; D 64 and
128; N 512 to 16384; causal and not), timed with CUDA events. Without one,
the CPU backends run on small shapes instead (the output says so).

--compare-torch also runs bench/sdpa.py (python3 with PyTorch and CUDA) on
the same shapes and prints one side-by-side table: ours vs SDPA's flash,
cuDNN, efficient and math backends (cuDNN where PyTorch has it).

--out is checked before the sweep starts. Ctrl-C (or SIGTERM) stops the sweep
within about a second and writes the cases finished before it, marked partial
in every file, then exits with status 130; a second Ctrl-C quits at once.
Each file is replaced whole or left as it was, never half written.

Examples:
  goflash bench                                  # default sweep, table on stdout
  goflash bench --compare-torch --out results/   # side by side with PyTorch
  goflash bench --seqlens 1024,4096 --headdims 128 --causal true --direction both
  goflash bench --force-arch 75                  # the Turing kernels, on any newer GPU
  goflash bench --dtype bf16 --compare-torch     # the bf16 kernels (sm_80+) beside SDPA in bf16
  goflash bench --force-arch 75 --compare-torch --torch-emulate sm75   # rehearse a T4 run on a newer GPU
  goflash bench --compare-torch --with-sm80   # on an H100/H200: the Hopper kernels, the sm_80 ones, SDPA flash and cuDNN in one table
  goflash bench --decode --compare-torch --peak-tbps 4.8   # KV-cache decode beside SDPA, bandwidth vs an H200's
  goflash bench --seqlens 8192 --window 1024,0 --softcap 30 --alibi   # the modified forward beside the plain one
  goflash bench --seqlens 8192 --direction bwd --deterministic --softcap 30   # the modified backward beside the plain one
  goflash bench --varlen 512,8192,1000,3000 --headdims 128   # packed sequences beside the same batch padded
  goflash bench --rung-source 4=rung4.cuh   # the kernel ladder, and rung 4 compiled from an edited source

The --with-sm80 example times, on an sm_90 GPU, the ` + implGPU + ` line's default
Hopper kernels (wgmma and TMA, dense fp16 and bf16 at flashattn.HopperHeadDims; the
backward without modifiers) beside
a ` + implGPUSM80 + ` line of the same cases on the sm_80 (mma.sync) kernels that
--force-arch 80 runs, and PyTorch's SDPA backends; elsewhere (no Hopper path)
and with --decode (the same decode kernels on both paths) the flag is ignored
with a note.

--window, --softcap and --alibi add a GPU line, ` + implGPUMod + `: the same cases with
that sliding window (left,right; -1 unbounded), softcap and ALiBi slopes
(Press et al.'s, one per head), which run the modified forward kernel
(fa2_fwd_*_mod[_cap][_alibi]) and backward kernels (pre, fa2_bwd_{dkdv,dq}_*_mod: the
three kernels, also where the plain backward runs the single pass, so compare them
with --deterministic; at D 256, whose only backward is the single pass, its
modified twin fa2_bwd_dkdvq[det]_*_mod), or with --decode the decode kernel with them (its TB/s
counts the bytes a window reads); the ` + implGPU + ` line stays the plain kernels'. A
causal case keeps its causal mask (a window's right must then be 0 or -1).

--decode times KV-cache decoding on the GPU instead (direction "decode"): --nq
new rows per sequence (default 1) against caches of --seqlens entries (default
1024 to 131072), --batch (default 1), --heads / --kv-heads (default 32/8: GQA),
--headdims (default 128), contiguous or paged in blocks of --page entries. Its
figure is the bytes of K and V read over the median time (TB/s), beside SDPA
timing the same forward (q of Nq rows over the whole cache, enable_gqa).

--ladder times the kernel ladder of tutorial chapter 6 instead (fp16 forward,
D 64; --seqlens default 1024 to 8192): rungs 1-4 as goflash-rung1..4 and the
shipped kernel as the GPU line (on an sm_90 GPU the sm_80 kernels, the
ladder's family). Each rung first passes attntest's check on a causal GQA
problem of 300 rows; its rows give the share of the allowed error it used and
what the driver made of the kernel (registers, shared memory per CTA,
occupancy). --rung-source R=FILE adds goflash-rung-edit: rung R compiled at
run time with NVRTC from FILE (flashattn.Device.LoadRungSource), checked and
timed the same way.

--varlen LENS times the varlen forward on the GPU (Device.ForwardVarlen: one
launch over the packed sequences of those lengths, each Nq = Nk) beside the
plain forward on the same batch padded to its longest sequence, per
--headdims (default 64,128) and --causal (default both), with --heads
(default hidden/D) and --kv-heads; both lines count TFLOP/s on the real
tokens only and give each call's device memory; --direction bwd times the
backward the same way (Device.BackwardVarlen's three launches beside the
padded batch's default backward; with --deterministic both calls'
deterministic backward); --window, --softcap and --alibi apply to both calls. It prints a table (or --json) and writes no files.`

// benchOpts are the parsed flags of goflash bench.
type benchOpts struct {
	shapes        shapeFlags
	direction     string
	deterministic bool
	reps, warmup  int
	backend       string
	forceArch     int
	withSM75      bool
	withSM80      bool // time the forced sm_80 path beside the Hopper forward (sm_90 GPUs)
	device        int
	workers       int
	out           string
	json          bool
	compareTorch  bool
	python, sdpa  string
	torchEmulate  string
	noReport      bool
	seed          uint64
	decode        bool    // time KV-cache decode (direction "decode")
	nq            int     // --decode: new rows per sequence
	page          int     // --decode: paged cache block size (0: contiguous)
	peakTBps      float64 // --decode: the device's HBM bandwidth, for the fraction reached
	window        string  // --window "left,right"
	varlen        string  // --varlen: comma-separated sequence lengths
	dtype         string  // --dtype: the GPU lines' (and PyTorch's) element type, fp16 or bf16
	mods          scoreMods
	ladder        bool      // --ladder: the kernel ladder's rungs
	rungSource    string    // --rung-source R=FILE
	rungEdit      *rungEdit // --rung-source, read
}

// benchDType is --dtype's flashattn.DType (planBench checked it).
func benchDType(s string) flashattn.DType {
	if s == flashattn.BF16.String() {
		return flashattn.BF16
	}
	return flashattn.FP16
}

// scoreMods are the score modifiers of --window, --softcap and --alibi.
type scoreMods struct {
	window  *flashattn.Window
	softcap float64
	alibi   bool
}

func (m scoreMods) any() bool { return m.window != nil || m.softcap != 0 || m.alibi }

// apply sets m on o, for a problem of hq query heads.
func (m scoreMods) apply(o *flashattn.Options, hq int) {
	o.Window, o.Softcap = m.window, m.softcap
	if m.alibi {
		o.ALiBi = attntest.ALiBiSlopes(hq)
	}
}

// parseWindow sets o.mods.window from --window (left,right).
func (o *benchOpts) parseWindow() error {
	if o.window == "" {
		return nil
	}
	var w flashattn.Window
	parts := strings.Split(o.window, ",")
	var err1, err2 error
	if len(parts) == 2 {
		w.Left, err1 = strconv.Atoi(parts[0])
		w.Right, err2 = strconv.Atoi(parts[1])
	}
	if len(parts) != 2 || err1 != nil || err2 != nil || w.Left < -1 || w.Right < -1 {
		return usagef("--window %q: want left,right, each >= 0 or -1 (unbounded)", o.window)
	}
	o.mods.window = &w
	return nil
}

// checkMods checks --window (parsing it) and --softcap.
func (o *benchOpts) checkMods() error {
	if err := o.parseWindow(); err != nil {
		return err
	}
	if c := o.mods.softcap; math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
		return usagef("--softcap %v: want 0 (off) or a positive cap", c)
	}
	return nil
}

func runBench(args []string, stdout, stderr io.Writer) error {
	o := benchOpts{}
	fs := newFlags("bench", benchSynopsis, stdout)
	fs.StringVar(&o.varlen, "varlen", "", "time the varlen forward on the GPU on sequences of these comma-separated lengths, beside the padded forward (see above)")
	fs.BoolVar(&o.ladder, "ladder", false, "time the kernel ladder on the GPU: each rung (tutorial chapter 6) checked, then timed, fp16 forward, D 64 (see above)")
	fs.StringVar(&o.rungSource, "rung-source", "", "with --ladder: also time rung R compiled with NVRTC from FILE, an edited source (R=FILE; implies --ladder)")
	fs.BoolVar(&o.decode, "decode", false, "time KV-cache decode on the GPU: --nq rows per sequence against caches of --seqlens entries (see above)")
	fs.IntVar(&o.nq, "nq", 1, "--decode: new query rows per sequence (1-16 typical)")
	fs.IntVar(&o.page, "page", 0, "--decode: paged cache in blocks of this many entries, a multiple of 16 dividing every cache length (0: contiguous)")
	fs.Float64Var(&o.peakTBps, "peak-tbps", 0, "--decode: the GPU's HBM bandwidth in TB/s (4.8 for an H200), to print the fraction reached")
	fs.StringVar(&o.window, "window", "", "GPU: also time a sliding window of left,right keys around the diagonal (-1 unbounded) as "+implGPUMod)
	fs.Float64Var(&o.mods.softcap, "softcap", 0, "GPU: also time this softcap (c*tanh(s/c)) as "+implGPUMod)
	fs.BoolVar(&o.mods.alibi, "alibi", false, "GPU: also time ALiBi (one slope per head) as "+implGPUMod)
	fs.IntVar(&o.shapes.batch, "batch", 0, "batch size B (0: tokens/N)")
	fs.IntVar(&o.shapes.heads, "heads", 0, "query heads H (0: hidden/D)")
	fs.IntVar(&o.shapes.kvHeads, "kv-heads", 0, "key/value heads Hkv, a divisor of H (0: H; fewer is GQA)")
	fs.IntVar(&o.shapes.kvLen, "kv-len", 0, "key/value sequence length Nk (0: N)")
	fs.IntVar(&o.shapes.tokens, "tokens", 16384, "tokens per batch, to derive B")
	fs.IntVar(&o.shapes.hidden, "hidden", 2048, "model width, to derive H")
	fs.Var(&o.shapes.seqLens, "seqlens", "sequence lengths N, comma-separated (default 512,...,16384 on a GPU; 128,256,512,1024 on the CPU)")
	fs.Var(&o.shapes.headDims, "headdims", "head dims D, comma-separated (default 64,128 on a GPU; 64 on the CPU)")
	fs.Var(&o.shapes.causal, "causal", "causal mask: true, false or both (default both)")
	fs.StringVar(&o.direction, "direction", "fwd", "what to time: fwd, bwd or both")
	fs.StringVar(&o.dtype, "dtype", "fp16", "GPU: the inputs' element type, fp16 or bf16 (the sm_80+ kernels; PyTorch's too with --compare-torch; not with --decode or --varlen)")
	fs.BoolVar(&o.deterministic, "deterministic", false, "time the deterministic backward (bit-reproducible; Options.Deterministic) as the GPU line; without it, bwd and both add it as "+implGPUDet)
	fs.IntVar(&o.reps, "reps", 0, "timed calls per shape, median reported (0: 20 on a GPU, 3 on the CPU)")
	fs.IntVar(&o.warmup, "warmup", -1, "untimed calls before timing (-1: 5 on a GPU, 1 on the CPU)")
	fs.StringVar(&o.backend, "backend", "auto", "auto, gpu, cpu (flash and naive), cpu-flash or cpu-naive")
	fs.IntVar(&o.forceArch, "force-arch", 0, "GPU: run the kernels built for this architecture, e.g. 75 for the Turing path, 80 for the sm_80 kernels instead of an H100/H200's Hopper ones (0: the device's own)")
	fs.BoolVar(&o.withSM75, "with-sm75", false, "GPU: also time the forced sm_75 (Turing) variant beside the default one")
	fs.BoolVar(&o.withSM80, "with-sm80", false, "GPU: also time the forced sm_80 (mma.sync) kernels beside the default Hopper ones (sm_90 GPUs)")
	fs.IntVar(&o.device, "device", 0, "GPU ordinal")
	fs.IntVar(&o.workers, "workers", 0, "CPU goroutines (0: GOMAXPROCS)")
	fs.StringVar(&o.out, "out", "", "directory for bench.json, bench.csv, bench.md and bench.html (default .out/bench-DATE)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout instead of the table")
	fs.BoolVar(&o.compareTorch, "compare-torch", false, "also time PyTorch SDPA ("+strings.Join(bench.TorchBackends, ", ")+") on the same shapes via bench/sdpa.py")
	fs.StringVar(&o.python, "python", "python3", "Python interpreter for --compare-torch")
	fs.StringVar(&o.torchEmulate, "torch-emulate", "", "with --compare-torch: have bench/sdpa.py answer as PyTorch does on another GPU; sm75: flash and cudnn unsupported as on a T4 (a rehearsal: the other backends still time this GPU)")
	fs.StringVar(&o.sdpa, "sdpa", "", "path of bench/sdpa.py (default: found from the working directory or the executable)")
	fs.BoolVar(&o.noReport, "no-report", false, "do not write the HTML report")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random inputs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.varlen != "" {
		if err := o.checkMods(); err != nil {
			return err
		}
		if o.dtype != "fp16" {
			return usagef("--dtype %s: --varlen times fp16 batches only", o.dtype)
		}
		return runVarlenBench(o, stdout)
	}
	if o.out == "" {
		o.out = filepath.Join(".out", "bench-"+time.Now().UTC().Format("20060102-150405"))
	}
	if err := checkPublishable(o.out, sourceCommit()); err != nil {
		return err
	}
	ctx, stop := benchContext(context.Background())
	defer stop()
	res, err := sweep(ctx, o, stderr)
	if err != nil {
		return err
	}
	err = reportBench(o, res, stdout, stderr)
	if res.Meta.Partial {
		// Interrupted: the files hold the finished cases; failed ones were
		// reported above.
		return fmt.Errorf("%w: %s holds the cases finished before it, marked partial", errInterrupted, filepath.Join(o.out, "bench.json"))
	}
	return err
}

// sweep runs the sweep and returns the results, not yet written anywhere:
// plan (where, what, how often), run (time GoFlash), compare (PyTorch).
// Once ctx is done it stops and returns what was finished, with
// res.Meta.Partial set and a note saying so.
func sweep(ctx context.Context, o benchOpts, stderr io.Writer) (*BenchResult, error) {
	p, err := planBench(o)
	if err != nil {
		return nil, err
	}
	// After the plan's checks (a refused plan creates no directory), before
	// the long part.
	if err := checkWritable(filepath.Join(o.out, "bench.json")); err != nil {
		if p.gpu != nil {
			p.gpu.Close()
		}
		return nil, err
	}
	p.run(ctx, stderr)
	if p.gpu != nil {
		p.gpu.Close() // before PyTorch runs: its memory is the GPU's again
	}
	if slices.ContainsFunc(p.res.Rows, func(r Row) bool { return r.LaunchTimed }) {
		p.res.Notes = append(p.res.Notes, "GoFlash GPU times include the first kernel's launch: nothing held the GPU while the host "+
			"enqueued, as PyTorch's times do by a GPU sleep (this driver has no stream memory operations, cuStreamWaitValue32, "+
			"or a CUDA tool such as Nsight Compute is attached)")
	}
	if p.res.Settings.Direction == "both" {
		p.res.Rows = append(p.res.Rows, derivedFwdBwd(p.res.Rows)...)
	}
	if o.compareTorch && !p.res.Meta.Partial {
		compareTorch(ctx, o, p, stderr)
		if ctx.Err() != nil {
			p.interrupted("interrupted during the PyTorch comparison: its rows are missing or incomplete")
		}
	}
	bench.SortRows(p.res.Rows)
	p.res.Table = bench.BuildTable(p.res.Rows)
	return p.res, nil
}

// benchImpl is one implementation to time.
type benchImpl struct {
	name string
	// run times case c in direction dir; once ctx is done it may stop
	// early and return a row that is not ok.
	run func(ctx context.Context, c Case, dir string) Row
}

// benchPlan is what a sweep will run.
type benchPlan struct {
	res          *BenchResult // metadata, settings, notes and rows so far
	gpu          gpuDevice    // nil on the CPU
	cases        []Case
	dirs         []string
	impls        []benchImpl
	reps, warmup int
}

// planBench checks the options and decides where to run (the GPU when
// usable or required, else the CPU), the cases, the implementations and the
// repetitions. With a GPU, the caller closes p.gpu.
func planBench(o benchOpts) (p *benchPlan, err error) {
	if !slices.Contains([]string{"fwd", "bwd", "both"}, o.direction) && !(o.decode && o.direction == dirDecode) {
		return nil, usagef("--direction %q: want fwd, bwd or both", o.direction)
	}
	if !slices.Contains([]string{"auto", "gpu", "cpu", "cpu-flash", "cpu-naive"}, o.backend) {
		return nil, usagef("--backend %q: want auto, gpu, cpu, cpu-flash or cpu-naive", o.backend)
	}
	if o.reps < 0 || o.warmup < -1 || o.workers < 0 || o.device < 0 {
		return nil, usagef("--reps, --warmup, --workers and --device must not be negative")
	}
	if err := checkWorkers(o.workers); err != nil {
		return nil, err
	}
	if err := o.checkMods(); err != nil {
		return nil, err
	}
	if o.forceArch != 0 && o.forceArch != 75 && o.forceArch != 80 {
		return nil, usagef("--force-arch %d: want 75 (the Turing kernels) or 80 (the sm_80+ kernels)", o.forceArch)
	}
	if !slices.Contains(bench.DTypes, o.dtype) {
		return nil, usagef("--dtype %q: want one of %q", o.dtype, bench.DTypes)
	}
	if o.dtype != "fp16" && o.decode {
		return nil, usagef("--dtype %s: --decode times fp16 caches only", o.dtype)
	}
	if o.rungSource != "" {
		o.ladder = true
		if o.rungEdit, err = parseRungSource(o.rungSource); err != nil {
			return nil, err
		}
	}
	if o.ladder {
		if err := checkLadderOpts(o); err != nil {
			return nil, err
		}
	}
	if o.torchEmulate != "" && (!o.compareTorch || !slices.Contains(bench.Emulations, o.torchEmulate)) {
		return nil, usagef("--torch-emulate %q: want one of %q, with --compare-torch", o.torchEmulate, bench.Emulations)
	}
	if o.decode {
		if err := decodePlanOpts(&o); err != nil {
			return nil, err
		}
	} else if o.nq != 1 || o.page != 0 || o.peakTBps != 0 {
		return nil, usagef("--nq, --page and --peak-tbps go with --decode")
	}
	res := &BenchResult{Schema: benchSchema, Meta: newMeta()}

	// Choose where to run: the GPU when usable (or required), else the CPU.
	var gpu gpuDevice
	var gpuWhy string
	if o.backend == "auto" || o.backend == "gpu" {
		g, gerr := openGPU(o.device)
		switch {
		case gerr == nil:
			gpu = g
			defer func() {
				if err != nil { // a refused plan does not keep the GPU open
					g.Close()
				}
			}()
		case o.backend == "gpu":
			return nil, fmt.Errorf("--backend gpu: %w", gerr)
		case o.device != 0: // a GPU asked for by name: its CPU sweep would answer another question
			return nil, fmt.Errorf("--device %d: %w", o.device, gerr)
		default:
			gpuWhy = gerr.Error()
		}
	}
	if o.decode && gpu == nil {
		return nil, usagef("--decode times the GPU decode kernels and needs a GPU (%s)", orDefault(gpuWhy, "the CPU backend was chosen"))
	}
	if (o.forceArch != 0 || o.withSM75 || o.withSM80) && gpu == nil {
		return nil, usagef("--force-arch, --with-sm75 and --with-sm80 need a GPU (%s)", orDefault(gpuWhy, "the CPU backend was chosen"))
	}
	if o.ladder && gpu == nil {
		return nil, usagef("--ladder times the GPU's kernel ladder and needs a GPU (%s)", orDefault(gpuWhy, "the CPU backend was chosen"))
	}
	if o.mods.any() && gpu == nil {
		return nil, usagef("--window, --softcap and --alibi time the GPU's modified kernels and need a GPU (%s)", orDefault(gpuWhy, "the CPU backend was chosen"))
	}
	if o.dtype != "fp16" && gpu == nil {
		return nil, usagef("--dtype %s times the GPU kernels and needs a GPU (%s); the CPU backends compute in float32", o.dtype, orDefault(gpuWhy, "the CPU backend was chosen"))
	}
	onGPU := gpu != nil
	reps, warmup := o.reps, o.warmup
	if reps == 0 {
		reps = map[bool]int{true: 20, false: 3}[onGPU]
	}
	if warmup < 0 {
		warmup = map[bool]int{true: 5, false: 1}[onGPU]
	}
	sf, note := sweepShapes(o, onGPU, gpuWhy)
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	cases, err := sf.cases()
	if err != nil {
		return nil, err
	}
	if o.decode {
		for i := range cases {
			cases[i].Dims.Nq, cases[i].Page = o.nq, o.page
		}
	}
	dtype := o.dtype
	if !onGPU {
		dtype = "fp32" // the CPU backends compute in float32, whatever --dtype says (fp16, its default)
	}
	res.Settings = Settings{Reps: reps, Warmup: warmup, Deterministic: o.deterministic, Backend: o.backend, Direction: o.direction, DType: dtype,
		Workers: o.workers, PageSize: o.page, PeakTBps: o.peakTBps}

	impls, err := sweepImpls(o, res, gpu, cases, reps, warmup)
	if err != nil {
		return nil, err
	}
	dirs := []string{dirFwd}
	switch o.direction {
	case "bwd":
		dirs = []string{dirBwd}
	case "both":
		dirs = []string{dirFwd, dirBwd}
		if onGPU { // timed as one call, as PyTorch's fwdbwd (the CPU's is derived: fwd + bwd)
			dirs = append(dirs, dirFwdBwd)
		}
	case dirDecode:
		dirs = []string{dirDecode}
	}
	return &benchPlan{res: res, gpu: gpu, cases: cases, dirs: dirs, impls: impls, reps: reps, warmup: warmup}, nil
}

// run times every implementation on every case and direction into
// p.res.Rows. Once ctx is done it stops, keeping the cases finished before
// (a case cut short is dropped: its row would be a cancellation, not a
// result), and marks the result partial.
func (p *benchPlan) run(ctx context.Context, stderr io.Writer) {
	total := len(p.cases) * len(p.dirs) * len(p.impls)
	pb := newProgress(stderr, total)
	defer pb.end()
	done := 0
	stopped := func() bool {
		if ctx.Err() == nil {
			return false
		}
		pb.end()
		p.interrupted(fmt.Sprintf("interrupted after %d of %d cases: the rest did not run", done, total))
		fmt.Fprintf(stderr, "interrupted: writing the %d finished case(s); Ctrl-C again quits at once\n", done)
		return true
	}
	// Implementation outermost: switching the GPU's kernel path reloads its
	// kernels, so each path runs all its cases in one go.
	for _, im := range p.impls {
		for _, c := range p.cases {
			for _, dir := range p.dirs {
				if stopped() {
					return
				}
				pb.begin(fmt.Sprintf("%s %s %s", im.name, dir, c))
				row := im.run(ctx, c, dir)
				if row.Status != statusOK && stopped() {
					return
				}
				p.res.Rows = append(p.res.Rows, row)
				done++
				pb.next()
			}
		}
	}
}

// interrupted marks the result partial, with a note saying what is missing.
func (p *benchPlan) interrupted(what string) {
	p.res.Meta.Partial = true
	p.res.Notes = append(p.res.Notes, "PARTIAL: "+what)
}

// compareTorch runs bench/sdpa.py on the plan's cases and adds its rows to
// p.res, with a note saying what the speedups are over, or why PyTorch did
// not run.
func compareTorch(ctx context.Context, o benchOpts, p *benchPlan, stderr io.Writer) {
	res := p.res
	script, err := findSDPA(o.sdpa)
	if err != nil {
		res.Torch = &TorchMeta{Status: statusSkipped, Reason: err.Error()}
	} else {
		fmt.Fprintf(stderr, "running %s %s on %d shapes (PyTorch SDPA %s)...\n", o.python, shortPath(script), len(p.cases), strings.Join(bench.TorchBackends, ", "))
		tm, rows := runTorch(ctx, o.python, script, p.cases, torchDirections(res.Settings.Direction), p.reps, p.warmup, o.device, o.torchEmulate, o.dtype, stderr)
		if got := orDefault(tm.DType, "fp16"); tm.Status == statusOK && got != o.dtype {
			// A script that ignored the spec's dtype timed other inputs: its rows would compare unlike with unlike.
			tm, rows = TorchMeta{Status: statusError, Reason: fmt.Sprintf("%s timed %s inputs, not %s", shortPath(script), got, o.dtype)}, nil
		}
		res.Torch = &tm
		res.Rows = append(res.Rows, rows...)
	}
	if res.Torch.Status != statusOK {
		res.Notes = append(res.Notes, "PyTorch comparison "+res.Torch.Status+": "+res.Torch.Reason)
	} else if b, ok := bench.ChooseBaseline(res.Rows); ok {
		res.Notes = append(res.Notes, "speedups are over "+b.Label)
	}
	// A speedup means something only between two runs on one device.
	switch t := res.Torch; {
	case t.Status != statusOK:
	case p.gpu == nil:
		res.Notes = append(res.Notes, fmt.Sprintf("NOT LIKE FOR LIKE: GoFlash ran on the CPU here, PyTorch on %s: the vs columns compare two devices", t.Device))
	case t.Emulate == "" && t.Capability != res.Device.Capability:
		res.Notes = append(res.Notes, fmt.Sprintf("NOT LIKE FOR LIKE: PyTorch ran on %s (compute capability %s), GoFlash on %s (%s): check --device and CUDA_VISIBLE_DEVICES", t.Device, t.Capability, res.Device.Name, res.Device.Capability))
	}
	if e := res.Torch.Emulate; e != "" {
		res.Notes = append(res.Notes, fmt.Sprintf("REHEARSAL: PyTorch answered as on %s (--torch-emulate %s): its flash backend is reported unsupported as PyTorch does there; every timing is of %s, not of such a GPU", e, e, res.Device.Name))
	}
}

// sweepShapes fills the shapes the flags leave open: the FA2 paper's sweep
// on a GPU; on the CPU small defaults, with a note saying which and why.
func sweepShapes(o benchOpts, onGPU bool, gpuWhy string) (shapeFlags, string) {
	sf := o.shapes
	if len(sf.causal) == 0 {
		sf.causal = causalFlag{false, true}
	}
	if onGPU {
		if sf.seqLens == nil {
			sf.seqLens = paperSeqLens
			if o.ladder {
				sf.seqLens = ladderSeqLens
			}
		}
		if sf.headDims == nil {
			sf.headDims = paperHeadDims
			if o.ladder {
				sf.headDims = intList{ladderCheck.Dims.D}
			}
		}
	} else {
		// The FA2 paper's sizes would take hours on a CPU: B and H default
		// to 1 and 4 there, N and D to a few small values.
		var changed []string
		if sf.batch == 0 {
			sf.batch = 1
			changed = append(changed, "B=1")
		}
		if sf.heads == 0 {
			sf.heads = 4
			changed = append(changed, "H=4")
		}
		if sf.seqLens == nil {
			sf.seqLens = intList{128, 256, 512, 1024}
			changed = append(changed, "N="+sf.seqLens.String())
		}
		if sf.headDims == nil {
			sf.headDims = intList{64}
			changed = append(changed, "D=64")
		}
		why := "the CPU backend was asked for"
		if gpuWhy != "" {
			why = "no usable GPU (" + gpuWhy + ")"
		}
		note := why + ": timing the CPU backends"
		if len(changed) > 0 {
			note += " with CPU-sized defaults (" + strings.Join(changed, ", ") + ") instead of the FA2 paper's sweep"
		}
		return sf, note
	}
	return sf, ""
}

// sweepImpls are the implementations to time: the GPU's kernels (and the
// forced sm_75 and sm_80 paths) or the CPU backends. It fills res.Device and
// adds notes.
func sweepImpls(o benchOpts, res *BenchResult, gpu gpuDevice, cases []Case, reps, warmup int) ([]benchImpl, error) {
	var impls []benchImpl
	onGPU := gpu != nil
	if onGPU {
		res.Device = gpu.Meta()
		if o.forceArch != 0 {
			res.Device.ForcedArch = o.forceArch
		}
		for _, c := range cases {
			if need := deviceBytes(c.Dims); res.Device.Memory > 0 && need > res.Device.Memory {
				return nil, tooLargef("%s needs %s of device memory for q, k, v, o and the LSE; %s has %s", c, fmtBytes(need), res.Device.Name, fmtBytes(res.Device.Memory))
			}
		}
		if o.forceArch != 0 {
			if err := gpu.Use(o.forceArch); err != nil {
				return nil, fmt.Errorf("--force-arch %d: %w", o.forceArch, err)
			}
		}
		name := gpuImplName(o.forceArch, res.Device.Arch)
		if o.withSM75 && res.Device.Arch < 80 {
			o.withSM75 = false
			res.Notes = append(res.Notes, fmt.Sprintf("--with-sm75 ignored: sm_%d runs the Turing kernels as its own", res.Device.Arch))
		}
		if o.withSM80 {
			if note := withSM80Ignored(o, res.Device.Arch); note != "" {
				o.withSM80 = false
				res.Notes = append(res.Notes, "--with-sm80 ignored: "+note)
			}
		}
		if o.ladder {
			return ladderImpls(o, res, gpu, reps, warmup), nil
		}
		arch, dt := o.forceArch, benchDType(o.dtype)
		// A GPU case is short and not cancellable once queued: run checks
		// ctx between cases.
		impls = append(impls, benchImpl{name, func(_ context.Context, c Case, dir string) Row {
			return gpu.Bench(c, dir, arch, o.deterministic, dt, scoreMods{}, warmup, reps)
		}})
		if o.mods.any() {
			impls = append(impls, benchImpl{implGPUMod, func(_ context.Context, c Case, dir string) Row {
				r := gpu.Bench(c, dir, arch, o.deterministic, dt, o.mods, warmup, reps)
				r.Impl = implGPUMod
				return r
			}})
		}
		// The default GPU backward may add dQ with atomics (the single pass):
		// the deterministic one is its own line.
		if (o.direction == "bwd" || o.direction == "both") && !o.deterministic && o.forceArch != 75 {
			impls = append(impls, benchImpl{implGPUDet, func(_ context.Context, c Case, dir string) Row {
				r := gpu.Bench(c, dir, arch, true, dt, scoreMods{}, warmup, reps)
				r.Impl = implGPUDet
				return r
			}})
		}
		if o.withSM75 && o.forceArch != 75 {
			impls = append(impls, benchImpl{implGPUSM75, func(_ context.Context, c Case, dir string) Row {
				return gpu.Bench(c, dir, 75, o.deterministic, dt, scoreMods{}, warmup, reps)
			}})
		}
		if o.withSM80 && o.forceArch != 80 && o.forceArch != 75 {
			impls = append(impls, benchImpl{implGPUSM80, func(_ context.Context, c Case, dir string) Row {
				return gpu.Bench(c, dir, 80, o.deterministic, dt, scoreMods{}, warmup, reps)
			}})
		}
		if o.direction != "fwd" {
			if ok, why := gpu.HasBackward(); !ok {
				res.Notes = append(res.Notes, "no GPU backward pass ("+why+"): the bwd and fwdbwd rows of "+implGPU+" say unsupported")
			}
		}
	} else {
		res.Device = cpuDeviceMeta(res.Meta)
		for _, be := range cpuBackends(o.backend) {
			name := map[flashattn.Backend]string{flashattn.CPUFlash: implCPUFlash, flashattn.CPUNaive: implCPUNaive}[be]
			for _, c := range cases {
				if err := checkHostMemory(c, be, o.direction != "fwd"); err != nil {
					return nil, err
				}
			}
			impls = append(impls, benchImpl{name, func(ctx context.Context, c Case, dir string) Row {
				return benchCPU(ctx, c, dir, be, o.deterministic, o.workers, warmup, reps, o.seed)
			}})
		}
	}

	return impls, nil
}

// withSM80Ignored says why --with-sm80 adds no line on a device of compute
// capability arch, or "" where it does: only an sm_90 GPU has a Hopper
// forward to set the sm_80 path beside, and the decode kernels are the same
// on both paths.
func withSM80Ignored(o benchOpts, arch int) string {
	switch {
	case arch < 80:
		return fmt.Sprintf("sm_%d has no sm_80 path", arch)
	case arch != 90:
		return fmt.Sprintf("sm_%d has no Hopper path; its default is the sm_80 path", arch)
	case o.forceArch == 75:
		return "--force-arch 75 times the Turing kernels as the GPU line"
	case o.decode:
		return "--decode runs the same decode kernels on both paths (the Hopper path is the dense forward's)"
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cpuBackends(flag string) []flashattn.Backend {
	switch flag {
	case "cpu-flash":
		return []flashattn.Backend{flashattn.CPUFlash}
	case "cpu-naive":
		return []flashattn.Backend{flashattn.CPUNaive}
	}
	return []flashattn.Backend{flashattn.CPUFlash, flashattn.CPUNaive}
}

func cpuDeviceMeta(m Meta) DeviceMeta {
	name := m.CPUModel
	if name == "" {
		name = m.OS + "/" + m.Arch
	}
	return DeviceMeta{Kind: "cpu", Name: fmt.Sprintf("%s (%d threads)", name, m.CPUs)}
}

// benchCPU times one CPU backend on one case: the median wall time of reps
// calls after warmup calls, and the bytes one call allocates. Once ctx is
// done the call in flight stops within one job (flashattn.ForwardContext)
// and the row is an error.
func benchCPU(ctx context.Context, c Case, dir string, be flashattn.Backend, deterministic bool, workers, warmup, reps int, seed uint64) Row {
	d := c.Dims
	row := Row{Impl: map[flashattn.Backend]string{flashattn.CPUFlash: implCPUFlash, flashattn.CPUNaive: implCPUNaive}[be],
		Direction: dir, Shape: bench.ShapeOf(d, c.Causal)}
	row.FLOPs = d.FLOPs(c.Causal)
	if dir == dirBwd {
		row.FLOPs = d.BackwardFLOPs(c.Causal)
	}
	q := flashattn.Random(d.QShape(), seed)
	k := flashattn.Random(d.KVShape(), seed+1)
	v := flashattn.Random(d.KVShape(), seed+2)
	opts := &flashattn.Options{Causal: c.Causal, Backend: be, Deterministic: deterministic, Workers: workers}
	call := func() error { _, err := flashattn.ForwardContext(ctx, q, k, v, opts); return err }
	if dir == dirBwd {
		fwd, err := flashattn.ForwardContext(ctx, q, k, v, opts)
		if err != nil {
			return failed(row, err)
		}
		dOut := flashattn.Random(d.QShape(), seed+3)
		call = func() error {
			_, err := flashattn.BackwardContext(ctx, q, k, v, fwd.Out, dOut, fwd.LSE, opts)
			return err
		}
	}
	ms, extra, err := timeCalls(call, warmup, reps)
	if err != nil {
		return failed(row, err)
	}
	row.Status, row.MS, row.ExtraBytes = statusOK, ms, extra
	row.TFLOPs = row.FLOPs / (ms * 1e-3) / 1e12
	return row
}

// timeCalls runs call warmup times, then reps times, and returns the median
// wall time in milliseconds and the bytes allocated by one call (the Go
// runtime's TotalAlloc over the first timed call).
func timeCalls(call func() error, warmup, reps int) (float64, int64, error) {
	for range warmup {
		if err := call(); err != nil {
			return 0, 0, err
		}
	}
	times := make([]float64, 0, reps)
	var extra int64
	for i := range reps {
		var before runtime.MemStats
		if i == 0 {
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
		t0 := time.Now()
		err := call()
		el := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		if i == 0 {
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			extra = int64(after.TotalAlloc - before.TotalAlloc)
		}
		times = append(times, float64(el)/float64(time.Millisecond))
	}
	return stats.Median(times), extra, nil
}

// failed records a failed case. Unsupported problems and out-of-memory
// (host: *flashattn.MemoryError; GPU: flashattn.ErrOutOfMemory) are statuses
// of their own, told by the error's type, not its words.
func failed(row Row, err error) Row {
	row.Status, row.Reason = statusError, oneLine(err.Error())
	var ue *flashattn.UnsupportedError
	var me *flashattn.MemoryError
	switch {
	case errors.As(err, &ue):
		row.Status = statusUnsupported
	case errors.As(err, &me) || errors.Is(err, flashattn.ErrOutOfMemory):
		row.Status = statusOOM
	}
	return row
}

// derivedFwdBwd adds, for every GoFlash implementation timed both forward
// and backward on a problem but not forward+backward as one call (the CPU
// backends), a fwdbwd row: the sum of the two medians.
func derivedFwdBwd(rows []Row) []Row {
	idx := map[string]Row{}
	for _, r := range rows {
		idx[r.Impl+"|"+r.Key()] = r
	}
	var out []Row
	for _, f := range rows {
		if f.Direction != dirFwd || strings.HasPrefix(f.Impl, implTorchPref) {
			continue
		}
		fb := f
		fb.Direction = dirFwdBwd
		if _, timed := idx[f.Impl+"|"+fb.Key()]; timed {
			continue
		}
		b := f
		b.Direction = dirBwd
		bw, ok := idx[f.Impl+"|"+b.Key()]
		if !ok {
			continue
		}
		r := f
		r.Direction, r.Derived, r.HostOverheadUS, r.LaunchUS, r.BeyondLaunchUS = dirFwdBwd, true, 0, 0, 0
		r.FLOPs = f.FLOPs * 3.5
		r.ExtraBytes = max(f.ExtraBytes, bw.ExtraBytes)
		if f.Status == statusOK && bw.Status == statusOK {
			r.MS = f.MS + bw.MS
			r.TFLOPs = r.FLOPs / (r.MS * 1e-3) / 1e12
		} else {
			r.Status, r.MS, r.TFLOPs = bw.Status, 0, 0
			if f.Status != statusOK {
				r.Status = f.Status
			}
			r.Reason = "needs both fwd and bwd: " + orDefault(bw.Reason, f.Reason)
		}
		out = append(out, r)
	}
	return out
}

// reportBench writes the files into o.out and prints the table (or the
// JSON).
func reportBench(o benchOpts, res *BenchResult, stdout, stderr io.Writer) error {
	dir := o.out
	paths, err := writeFiles(dir, res)
	if err != nil {
		return err
	}
	if !o.noReport {
		p := filepath.Join(dir, "bench.html")
		if err := writeBenchHTML(p, res); err != nil {
			return fmt.Errorf("writing the HTML report: %w", err)
		}
		paths = append(paths, p)
	}
	bad := 0
	for _, r := range res.Rows {
		switch {
		case r.Status != statusError:
		case strings.HasPrefix(r.Impl, implTorchPref):
			// PyTorch's failures are reported, not ours to fail on.
			fmt.Fprintf(stderr, "warning: %s %s %s: %s\n", r.Impl, r.Direction, caseOf(r), r.Reason)
		default:
			bad++
			fmt.Fprintf(stderr, "error: %s %s %s: %s\n", r.Impl, r.Direction, caseOf(r), r.Reason)
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printBenchText(stdout, res, paths)
	}
	if bad > 0 {
		return fmt.Errorf("%d benchmark case(s) failed (see above and %s)", bad, filepath.Join(dir, "bench.json"))
	}
	return nil
}

func printBenchText(stdout io.Writer, res *BenchResult, paths []string) {
	fmt.Fprintf(stdout, "goflash bench on %s; commit %s; %s\n", res.Device.Name, res.Meta.Commit, res.Meta.Date)
	if t := res.Torch; t != nil && t.Status == statusOK {
		fmt.Fprintf(stdout, "%s (CUDA %s)", t.Label(), t.CUDA)
		if t.DType != "" && t.DType != "fp16" {
			fmt.Fprintf(stdout, ", %s inputs", t.DType)
		}
		fmt.Fprintln(stdout)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	fmt.Fprintf(stdout, "median of %d calls after %d warm-up; TFLOP/s by the FA2 convention", res.Settings.Reps, res.Settings.Warmup)
	if res.Settings.DType != "" && res.Settings.DType != "fp16" {
		fmt.Fprintf(stdout, "; %s inputs", res.Settings.DType)
	}
	fmt.Fprint(stdout, "\n\n")
	printTable(stdout, res.Table)
	printDecodeBandwidth(stdout, res)
	fmt.Fprintln(stdout)
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
}
