package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
	"github.com/goflash/goflash/viz"
)

const demoSynopsis = `Run exact attention on a sample sentence (a fixed embedding table shipped in
the binary) and on random data of a few sizes, on the GPU when one is usable,
else on the CPU; check every result against a float64 reference by the
FlashAttention-2 tolerance rule; measure time and memory of naive and flash
attention; write one self-contained HTML report (attention heatmaps, the
tiling schedule, the online softmax of one row, memory and speed charts).

Examples:
  goflash                         # the demo, report in .out/goflash-demo.html
  goflash demo --out report.html --sizes 256,1024
  goflash demo --backend cpu --json`

type demoOpts struct {
	out      string
	json     bool
	backend  string
	sizes    intList
	heads    int
	headDim  int
	causal   bool
	reps     int
	workers  int
	device   int
	seed     uint64
	noReport bool
}

// DemoSummary is what the demo found; --json prints it.
type DemoSummary struct {
	Meta     Meta         `json:"meta"`
	Backend  string       `json:"backend"` // what ran the attention: gpu or cpu-flash
	Reason   string       `json:"reason"`  // why (for the CPU: why not the GPU)
	Device   string       `json:"device"`
	Sentence SentenceRun  `json:"sentence"`
	Random   []RandomRun  `json:"random"`
	Memory   []MemoryRun  `json:"memory"`
	Report   string       `json:"report,omitempty"`
	Seconds  float64      `json:"seconds"`
	Trace    TraceSummary `json:"trace"`
}

// SentenceRun is the sample sentence's result.
type SentenceRun struct {
	Tokens   []string `json:"tokens"`
	Heads    int      `json:"heads"`
	D        int      `json:"d"`
	Causal   bool     `json:"causal"`
	Backend  string   `json:"backend"`
	Accuracy Accuracy `json:"accuracy"`
	// Strongest is, per head, each token's most attended earlier token.
	Strongest [][]string `json:"strongest"`
}

// RandomRun is one random problem: the chosen backend's time and accuracy,
// and the CPU naive backend's time for comparison.
type RandomRun struct {
	B, N, H, D int
	Causal     bool     `json:"causal"`
	Backend    string   `json:"backend"`
	MS         float64  `json:"ms"`           // median wall time of one call (GPU: kernel time by CUDA events)
	Accuracy   Accuracy `json:"accuracy"`     // of the chosen backend
	FlashMS    float64  `json:"cpu_flash_ms"` // CPU flash, median wall time
	NaiveMS    float64  `json:"cpu_naive_ms"` // CPU naive, median wall time
}

// MemoryRun is the memory one forward call of one (batch, head) allocates,
// measured with the Go runtime's TotalAlloc, at sequence length N.
type MemoryRun struct {
	N          int   `json:"n"`
	D          int   `json:"d"`
	NaiveBytes int64 `json:"cpu_naive_bytes"`
	FlashBytes int64 `json:"cpu_flash_bytes"`
	// GPUExtraBytes is the device memory of a GPU forward call beyond q, k,
	// v and o, when a GPU ran (all B*H heads).
	GPUExtraBytes int64 `json:"gpu_extra_bytes,omitempty"`
}

// TraceSummary describes the traced CPU flash run drawn in the report.
type TraceSummary struct {
	N, D, Br, Bc, Tr, Tc int
	Computed, Masked     int
	Skipped              int
	Row                  int
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	o := demoOpts{}
	fs := newFlags("demo", demoSynopsis, stdout)
	fs.StringVar(&o.out, "out", filepath.Join(".out", "goflash-demo.html"), "path of the HTML report")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON on stdout")
	fs.StringVar(&o.backend, "backend", "auto", "auto (GPU when usable, else CPU), gpu or cpu")
	o.sizes = intList{256, 512, 1024}
	fs.Var(&o.sizes, "sizes", "sequence lengths N of the random problems, comma-separated")
	fs.IntVar(&o.heads, "heads", 4, "heads H of the random problems")
	fs.IntVar(&o.headDim, "headdim", 64, "head dim D of the random problems")
	fs.BoolVar(&o.causal, "causal", false, "causal mask on the random problems (the sentence is always causal)")
	fs.IntVar(&o.reps, "reps", 3, "timed calls per problem, median reported")
	fs.IntVar(&o.workers, "workers", 0, "CPU goroutines (0: GOMAXPROCS)")
	fs.IntVar(&o.device, "device", 0, "GPU ordinal")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random inputs")
	fs.BoolVar(&o.noReport, "no-report", false, "do not write the HTML report")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if !o.noReport {
		if err := checkWritable(o.out); err != nil {
			return err
		}
	}
	sum, rep, err := demo(o, stderr)
	if err != nil {
		return err
	}
	if !o.noReport {
		if err := writeFileAtomic(o.out, func(w io.Writer) error { _, err := rep.WriteTo(w); return err }); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		if abs, err := filepath.Abs(o.out); err == nil {
			sum.Report = abs
		} else {
			sum.Report = o.out
		}
	}
	if o.json {
		if err := printJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		printDemo(stdout, sum)
	}
	return demoFailures(sum)
}

func (o demoOpts) validate() error {
	if !slices.Contains([]string{"auto", "gpu", "cpu"}, o.backend) {
		return usagef("--backend %q: want auto, gpu or cpu", o.backend)
	}
	if o.reps < 1 {
		return usagef("--reps %d: want >= 1", o.reps)
	}
	if o.workers < 0 || o.device < 0 {
		return usagef("--workers and --device must not be negative")
	}
	if err := checkWorkers(o.workers); err != nil {
		return err
	}
	for _, n := range o.sizes {
		d := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: o.heads, Hkv: o.heads, D: o.headDim}
		if err := d.Validate(); err != nil {
			return &usageError{strings.TrimPrefix(err.Error(), "flashattn: ") + " (see --sizes, --heads, --headdim)"}
		}
		// The demo checks every result against a float64 reference and runs
		// the naive backend: keep it a demo.
		if n > 8192 || float64(o.heads)*float64(n)*float64(n)*float64(o.headDim) > 4e10 {
			return usagef("random problem N=%d H=%d D=%d is too large for the demo (it runs a float64 reference); use goflash bench", n, o.heads, o.headDim)
		}
		if need, lim := demoBytes(Case{Dims: d}), flashattn.HostMemoryLimit(); need > lim {
			return tooLargef("random problem N=%d H=%d D=%d needs about %s of host memory; this machine allows %s (see --sizes, --heads, --headdim)",
				n, o.heads, o.headDim, fmtBytes(need), fmtBytes(lim))
		}
	}
	return nil
}

// demoBytes estimates the host memory of one random problem of the demo: a
// CPU naive run (hostBytes) and attntest's float64 reference and baseline
// of its forward pass (q, k, v and O, each twice, in float64). The library
// refuses anything beyond its limit too (*flashattn.MemoryError, exit 3);
// this says so before the demo starts.
func demoBytes(c Case) int64 {
	d := c.Dims
	q := float64(d.B) * float64(d.Nq) * float64(d.Hq) * float64(d.D)
	kv := float64(d.B) * float64(d.Nk) * float64(d.Hkv) * float64(d.D)
	n := float64(hostBytes(c, flashattn.CPUNaive, false)) + 2*8*(2*q+2*kv)
	if n >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// demoFailures turns failed accuracy checks into an error (exit status 1).
func demoFailures(s *DemoSummary) error {
	var bad []string
	if !s.Sentence.Accuracy.Pass {
		bad = append(bad, "sentence")
	}
	for _, r := range s.Random {
		if !r.Accuracy.Pass {
			bad = append(bad, fmt.Sprintf("N=%d", r.N))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("accuracy check failed for %s", strings.Join(bad, ", "))
	}
	return nil
}

// demoRun is one demo: the backend asked for and, once the library has
// put a problem on the GPU, the device used to time kernels there.
type demoRun struct {
	o    demoOpts
	want flashattn.Backend
	gpu  gpuDevice
}

// forward runs one problem the way a user's call would: Auto lets the
// library choose (GPU when usable for the problem, else CPU flash) and its
// Result says which ran and why.
func (r *demoRun) forward(q, k, v *flashattn.Tensor, causal bool) (*flashattn.Result, error) {
	return flashattn.Forward(q, k, v, &flashattn.Options{Causal: causal, Backend: r.want, Device: r.o.device, Workers: r.o.workers})
}

// device opens the GPU for kernel timing, once.
func (r *demoRun) device() (gpuDevice, error) {
	if r.gpu == nil {
		g, err := openGPU(r.o.device)
		if err != nil {
			return nil, err
		}
		r.gpu = g
	}
	return r.gpu, nil
}

func precisionOf(b flashattn.Backend) attntest.Precision {
	if b == flashattn.GPU {
		return attntest.FP16
	}
	return attntest.FP32
}

// demo runs everything and builds the report (not yet written).
func demo(o demoOpts, stderr io.Writer) (*DemoSummary, *viz.Report, error) {
	t0 := time.Now()
	meta := newMeta()
	sum := &DemoSummary{Meta: meta, Device: cpuDeviceMeta(meta).Name}
	r := &demoRun{o: o, want: map[string]flashattn.Backend{"auto": flashattn.Auto, "cpu": flashattn.CPUFlash, "gpu": flashattn.GPU}[o.backend]}
	defer func() {
		if r.gpu != nil {
			r.gpu.Close()
		}
	}()
	// Each part runs first and returns what it adds to the report, so the
	// report can open with where everything ran.
	var sections []func(*viz.Report) error
	for _, part := range []func(*demoRun, *DemoSummary, io.Writer) (func(*viz.Report) error, error){
		demoSentence, // 1. the sentence: heatmaps, its tiling
		demoTrace,    // 2. a traced random causal problem: 8 x 8 tiles, online softmax
		demoRandom,   // 3. random problems: accuracy, memory, speed
	} {
		add, err := part(r, sum, stderr)
		if err != nil {
			return nil, nil, err
		}
		sections = append(sections, add)
	}
	if r.gpu != nil {
		sum.Device = r.gpu.Meta().Name
	}
	rep := viz.NewReport("GoFlash demo: exact attention, FlashAttention-2 style")
	rep.AddText(fmt.Sprintf("Attention ran on %s (%s): %s. %s, commit %s, %s.", sum.Device, sum.Backend, sum.Reason, meta.GoVersion, meta.Commit, meta.Date))
	for _, add := range sections {
		if err := add(rep); err != nil {
			return nil, nil, err
		}
	}
	sum.Seconds = time.Since(t0).Seconds()
	return sum, rep, nil
}

func demoSentence(r *demoRun, sum *DemoSummary, _ io.Writer) (func(*viz.Report) error, error) {
	s, err := loadSentence()
	if err != nil {
		return nil, err
	}
	sr := SentenceRun{Tokens: s.Tokens, Heads: sentHeads, D: sentHeadDim, Causal: true}
	res, err := r.forward(s.Q, s.K, s.V, true)
	if err != nil {
		return nil, fmt.Errorf("sentence: %w", err)
	}
	sr.Backend = res.Backend.String()
	sr.Accuracy = checkForward(precisionOf(res.Backend), s.Q, s.K, s.V, true, res)

	// The weights, per head, from the library's inputs (viz computes them in
	// float64), and each token's strongest link.
	heads := make([][][]float64, sentHeads)
	for h := range heads {
		w, err := viz.AttentionWeights(s.Q, s.K, 0, h, &flashattn.Options{Causal: true})
		if err != nil {
			return nil, err
		}
		heads[h] = w
		var links []string
		for i, row := range w {
			j := 0
			for jj, x := range row {
				if x > row[j] {
					j = jj
				}
			}
			links = append(links, fmt.Sprintf("%s→%s %.2f", s.Tokens[i], s.Tokens[j], row[j]))
		}
		sr.Strongest = append(sr.Strongest, links)
	}
	sum.Sentence = sr
	hm, err := viz.AttentionHeads(heads, s.Tokens, s.Tokens, 2, "Attention weights of the sentence")
	if err != nil {
		return nil, err
	}
	// The sentence's own tiling: 4 x 4 tiles on 12 tokens (traced on the CPU,
	// the backend that records its steps).
	tr := &flashattn.Trace{Head: 0, Row: len(s.Tokens) - 1}
	if _, err := flashattn.Forward(s.Q, s.K, s.V, &flashattn.Options{Causal: true, Backend: flashattn.CPUFlash, BlockQ: 4, BlockK: 4, Trace: tr}); err != nil {
		return nil, err
	}
	tc, err := viz.Tiling(tr)
	if err != nil {
		return nil, err
	}
	return func(rep *viz.Report) error {
		rep.AddHeading("A sentence, two heads")
		rep.AddText(fmt.Sprintf("%q: %d tokens with a fixed 16-dim embedding (8 hand-made features, 8 position dims), projected by fixed weights to %d heads of dim %d, causal. "+
			"Head 0 asks \"who?\": pronouns, verbs and adjectives attend to animate nouns. Head 1 attends to the previous token. "+
			"Computed by %s; max |error| vs the float64 reference %.2g (%s baseline %.2g): %s.",
			strings.Join(s.Tokens, " "), len(s.Tokens), sentHeads, sentHeadDim, sr.Backend,
			sr.Accuracy.MaxErrOut, sr.Accuracy.Precision, sr.Accuracy.BaselineErrOut, passWord(sr.Accuracy.Pass)))
		rep.AddChart(hm)
		rep.AddText(fmt.Sprintf("FlashAttention-2 cuts the %d x %d score matrix into tiles (here Br = Bc = 4) and never stores it: "+
			"under the causal mask tiles above the diagonal are skipped, those on it are masked element by element.", len(s.Tokens), len(s.Tokens)))
		rep.AddChart(tc)
		return nil
	}, nil
}

func passWord(ok bool) string {
	if ok {
		return "within the FA2 tolerance"
	}
	return "OUTSIDE the FA2 tolerance"
}

func demoTrace(r *demoRun, sum *DemoSummary, _ io.Writer) (func(*viz.Report) error, error) {
	o := r.o
	const n, d, blk = 256, 64, 32
	dims := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 1, Hkv: 1, D: d}
	q := flashattn.Random(dims.QShape(), o.seed+100)
	k := flashattn.Random(dims.KVShape(), o.seed+101)
	v := flashattn.Random(dims.KVShape(), o.seed+102)
	tr := &flashattn.Trace{Row: 200}
	opts := &flashattn.Options{Causal: true, Backend: flashattn.CPUFlash, BlockQ: blk, BlockK: blk, Trace: tr, Workers: o.workers}
	if _, err := flashattn.Forward(q, k, v, opts); err != nil {
		return nil, err
	}
	ts := TraceSummary{N: n, D: d, Br: tr.Br, Bc: tr.Bc, Tr: tr.Tr, Tc: tr.Tc, Row: tr.Row}
	for _, s := range tr.Steps {
		switch s.Kind {
		case flashattn.StepComputed:
			ts.Computed++
		case flashattn.StepMasked:
			ts.Masked++
		case flashattn.StepSkipped:
			ts.Skipped++
		}
	}
	sum.Trace = ts
	tc, err := viz.Tiling(tr)
	if err != nil {
		return nil, err
	}
	row, err := viz.TracedRow(q, k, tr, &flashattn.Options{Causal: true})
	if err != nil {
		return nil, err
	}
	sc, err := viz.OnlineSoftmax(tr, viz.SoftmaxReference{Scores: row})
	if err != nil {
		return nil, err
	}
	return func(rep *viz.Report) error {
		rep.AddHeading("The tiling schedule")
		rep.AddText(fmt.Sprintf("A random causal problem, N = %d, D = %d, tiles of Br = %d query rows and Bc = %d keys: a %d x %d grid, "+
			"%d tiles computed, %d masked on the diagonal, %d skipped. Each row of tiles is one Q block: on a GPU, one thread block; "+
			"the Q blocks run in parallel and each walks its K blocks left to right.", n, d, tr.Br, tr.Bc, tr.Tr, tr.Tc, ts.Computed, ts.Masked, ts.Skipped))
		rep.AddChart(tc)
		rep.AddHeading("The online softmax of one row")
		rep.AddText(fmt.Sprintf("Row %d keeps a running max m and a running sum l as K blocks arrive; when m grows, the partial output is rescaled by exp(m_old - m_new). "+
			"At the last block m and l equal the exact max and sum of the row: the output is exact, without the N x N matrix.", tr.Row))
		rep.AddChart(sc)
		return nil
	}, nil
}

// randomProblem is one random problem of the demo.
type randomProblem struct {
	c    Case
	seed uint64
}

// planRandom lists the random problems, one per --sizes entry.
func planRandom(o demoOpts) []randomProblem {
	var ps []randomProblem
	for i, n := range o.sizes {
		d := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: o.heads, Hkv: o.heads, D: o.headDim}
		ps = append(ps, randomProblem{c: Case{Dims: d, Causal: o.causal}, seed: o.seed + uint64(10*i)})
	}
	return ps
}

// demoRandom runs the random problems (the library's choice of backend
// checked against float64, then CPU flash and naive timed, the GPU kernel
// timed where it ran, the memory of one head measured) and reports them.
func demoRandom(r *demoRun, sum *DemoSummary, stderr io.Writer) (func(*viz.Report) error, error) {
	ps := planRandom(r.o)
	pb := newProgress(stderr, len(ps))
	defer pb.end()
	var speed []viz.SpeedPoint
	var mem []viz.MemPoint
	for i, p := range ps {
		pb.begin(fmt.Sprintf("random N=%d", p.c.Dims.Nq))
		rr, err := r.checkRandom(p)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			sum.Backend, sum.Reason = rr.Backend, rr.reason
			if r.want == flashattn.CPUFlash {
				sum.Reason = "--backend cpu"
			}
		}
		sp, gpuExtra, err := r.timeRandom(p, &rr)
		if err != nil {
			return nil, err
		}
		mr, mp, err := r.memoryRandom(p)
		if err != nil {
			return nil, err
		}
		mr.GPUExtraBytes = gpuExtra
		sum.Random, sum.Memory = append(sum.Random, rr.RandomRun), append(sum.Memory, mr)
		speed, mem = append(speed, sp...), append(mem, mp...)
		pb.next()
	}
	return randomReport(r, sum, speed, mem)
}

// checkedRun is a random problem after the library ran it: the summary
// row, and why the library chose its backend.
type checkedRun struct {
	RandomRun
	reason string
	onGPU  bool
}

// checkRandom runs p with the library's choice of backend and checks the
// result against float64.
func (r *demoRun) checkRandom(p randomProblem) (checkedRun, error) {
	d := p.c.Dims
	q := flashattn.Random(d.QShape(), p.seed)
	k := flashattn.Random(d.KVShape(), p.seed+1)
	v := flashattn.Random(d.KVShape(), p.seed+2)
	res, err := r.forward(q, k, v, p.c.Causal)
	if err != nil {
		return checkedRun{}, fmt.Errorf("random N=%d: %w", d.Nq, err)
	}
	rr := RandomRun{B: d.B, N: d.Nq, H: d.Hq, D: d.D, Causal: p.c.Causal, Backend: res.Backend.String()}
	rr.Accuracy = checkForward(precisionOf(res.Backend), q, k, v, p.c.Causal, res)
	return checkedRun{RandomRun: rr, reason: res.Reason, onGPU: res.Backend == flashattn.GPU}, nil
}

// timeRandom times CPU flash and naive on p and, when the library ran p on
// the GPU, the GPU kernel; it fills rr's times and returns the speed points
// and the GPU call's extra device bytes.
func (r *demoRun) timeRandom(p randomProblem, rr *checkedRun) ([]viz.SpeedPoint, int64, error) {
	o, d, n := r.o, p.c.Dims, p.c.Dims.Nq
	var speed []viz.SpeedPoint
	for _, cb := range []flashattn.Backend{flashattn.CPUFlash, flashattn.CPUNaive} {
		row := benchCPU(context.Background(), p.c, dirFwd, cb, false, o.workers, 0, o.reps, p.seed)
		if row.Status != statusOK {
			return nil, 0, fmt.Errorf("random N=%d on %s: %s", n, cb, row.Reason)
		}
		name := bench.SeriesCPUFlash
		if cb == flashattn.CPUNaive {
			name, rr.NaiveMS = bench.SeriesCPUNaive, row.MS
		} else {
			rr.FlashMS = row.MS
		}
		speed = append(speed, viz.SpeedPoint{Backend: name, B: d.B, N: n, H: d.Hq, D: d.D, Causal: p.c.Causal, Millis: row.MS})
	}
	rr.MS = rr.FlashMS
	if !rr.onGPU {
		return speed, 0, nil
	}
	gpu, err := r.device()
	if err != nil {
		return nil, 0, err
	}
	row := gpu.Bench(p.c, dirFwd, 0, false, flashattn.FP16, scoreMods{}, 1, o.reps)
	if row.Status != statusOK {
		return nil, 0, fmt.Errorf("random N=%d on the GPU: %s", n, row.Reason)
	}
	rr.MS = row.MS
	speed = append(speed, viz.SpeedPoint{Backend: bench.SeriesGPUFlash, B: d.B, N: n, H: d.Hq, D: d.D, Causal: p.c.Causal, Millis: row.MS})
	return speed, row.ExtraBytes, nil
}

// memoryRandom measures what one forward call of one (batch, head) of p
// allocates on the CPU, naive and flash.
func (r *demoRun) memoryRandom(p randomProblem) (MemoryRun, []viz.MemPoint, error) {
	n := p.c.Dims.Nq
	mr := MemoryRun{N: n, D: p.c.Dims.D}
	var mem []viz.MemPoint
	one := Case{Dims: flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 1, Hkv: 1, D: p.c.Dims.D}, Causal: p.c.Causal}
	for _, cb := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
		row := benchCPU(context.Background(), one, dirFwd, cb, false, r.o.workers, 0, 1, p.seed)
		if row.Status != statusOK {
			return MemoryRun{}, nil, fmt.Errorf("memory N=%d on %s: %s", n, cb, row.Reason)
		}
		if cb == flashattn.CPUNaive {
			mr.NaiveBytes = row.ExtraBytes
			mem = append(mem, viz.MemPoint{Backend: bench.SeriesCPUNaive, N: n, Bytes: float64(row.ExtraBytes)})
		} else {
			mr.FlashBytes = row.ExtraBytes
			mem = append(mem, viz.MemPoint{Backend: bench.SeriesCPUFlash, N: n, Bytes: float64(row.ExtraBytes)})
		}
	}
	return mr, mem, nil
}

// randomReport draws the random problems' accuracy, memory and speed.
func randomReport(r *demoRun, sum *DemoSummary, speed []viz.SpeedPoint, mem []viz.MemPoint) (func(*viz.Report) error, error) {
	o := r.o
	ranGPU := r.gpu != nil
	mc, err := viz.Memory(mem, viz.MemoryOptions{B: 1, H: 1, D: o.headDim, ElemBytes: 4, ScoreHeads: 1, WithoutInputs: true,
		CapacityBytes: 16e9, CapacityLabel: "T4: 16 GB"})
	if err != nil {
		return nil, err
	}
	spc, err := viz.Speed(speed, viz.SpeedOptions{Subtitle: fmt.Sprintf("B = 1, H = %d, D = %d; median of %d calls", o.heads, o.headDim, o.reps)})
	if err != nil {
		return nil, err
	}
	return func(rep *viz.Report) error {
		rep.AddHeading("Accuracy")
		rep.AddText(fmt.Sprintf("Random N(0,1) inputs, B = 1, H = %d, D = %d, causal %t, computed by %s and compared with a float64 reference "+
			"(flashattn/attntest). The FA2 rule: the error may be at most twice that of a textbook computation in the same precision "+
			"(fp32 on the CPU, fp16 inputs with fp32 accumulation on a GPU), plus a rounding floor.", o.heads, o.headDim, o.causal, sum.Backend))
		var arows [][]string
		for _, r := range sum.Random {
			arows = append(arows, []string{fmt.Sprint(r.N), r.Backend, fmt.Sprintf("%.2e", r.Accuracy.MaxErrOut), fmt.Sprintf("%.2e", r.Accuracy.BaselineErrOut),
				fmt.Sprintf("%.2e", r.Accuracy.MaxErrLSE), passWord(r.Accuracy.Pass)})
		}
		rep.AddTable([]string{"N", "backend", "max |err| of O", "baseline's", "max |err| of LSE", "verdict"}, arows)

		rep.AddHeading("Memory")
		rep.AddText("Bytes one forward call of one (batch, head) allocates on the CPU, measured with the Go runtime (TotalAlloc), against the formulas: " +
			"naive attention stores the N x N scores and probabilities, flash attention only O and the log-sum-exp (plus fixed-size tiles).")
		rep.AddChart(mc)
		mh := []string{"N", "cpu-naive", "cpu-flash", "naive / flash"}
		if ranGPU {
			mh = append(mh, fmt.Sprintf("GPU extra device bytes (B=1, H=%d)", o.heads))
		}
		var mrows [][]string
		for _, m := range sum.Memory {
			row := []string{fmt.Sprint(m.N), fmtBytes(m.NaiveBytes), fmtBytes(m.FlashBytes), fmt.Sprintf("%.1fx", float64(m.NaiveBytes)/float64(max(m.FlashBytes, 1)))}
			if ranGPU {
				row = append(row, fmtBytes(m.GPUExtraBytes))
			}
			mrows = append(mrows, row)
		}
		rep.AddTable(mh, mrows)

		rep.AddHeading("Speed")
		rep.AddText("Wall time of one forward call on the CPU (and kernel time by CUDA events on a GPU), as TFLOP/s by the FA2 convention (4·B·H·N²·D, halved when causal). " +
			"On a CPU both algorithms do the same arithmetic; the GPU is where avoiding the N x N matrix's memory traffic pays. For GPU numbers side by side with PyTorch run goflash bench --compare-torch.")
		rep.AddChart(spc)
		sh := []string{"N", "cpu-flash ms", "cpu-naive ms"}
		if ranGPU {
			sh = append(sh, "gpu kernel ms")
		}
		var srows [][]string
		for _, r := range sum.Random {
			row := []string{fmt.Sprint(r.N), fmtSig(r.FlashMS), fmtSig(r.NaiveMS)}
			if ranGPU {
				gms := "-"
				if r.Backend == flashattn.GPU.String() {
					gms = fmtSig(r.MS)
				}
				row = append(row, gms)
			}
			srows = append(srows, row)
		}
		rep.AddTable(sh, srows)
		return nil
	}, nil
}

// printDemo writes the human summary.
func printDemo(w io.Writer, s *DemoSummary) {
	fmt.Fprintf(w, "GoFlash demo: exact attention, FlashAttention-2 tiling\n")
	fmt.Fprintf(w, "backend: %s (%s)\n", s.Backend, s.Reason)
	fmt.Fprintf(w, "device:  %s\n\n", s.Device)
	st := s.Sentence
	fmt.Fprintf(w, "sentence %q\n", strings.Join(st.Tokens, " "))
	fmt.Fprintf(w, "  %d tokens, %d heads, D=%d, causal, on %s: max |err| vs float64 %.2g (%s baseline %.2g) %s\n",
		len(st.Tokens), st.Heads, st.D, st.Backend, st.Accuracy.MaxErrOut, st.Accuracy.Precision, st.Accuracy.BaselineErrOut, okMark(st.Accuracy.Pass))
	for h, links := range st.Strongest {
		fmt.Fprintf(w, "  head %d: %s\n", h, strings.Join(pick(links, 7, 8, 9, 11), ", "))
	}
	t := s.Trace
	fmt.Fprintf(w, "\ntiling (causal N=%d, Br=Bc=%d): %dx%d tiles, %d computed, %d masked, %d skipped\n",
		t.N, t.Br, t.Tr, t.Tc, t.Computed, t.Masked, t.Skipped)
	if len(s.Random) > 0 {
		r0 := s.Random[0]
		fmt.Fprintf(w, "\nrandom data, B=%d H=%d D=%d causal=%t (time: median wall ms; memory: one head, bytes allocated per call)\n", r0.B, r0.H, r0.D, r0.Causal)
		fmt.Fprintf(w, "  %6s  %-18s  %9s  %9s", "N", "max |err| (base)", "flash ms", "naive ms")
		if s.Backend == "gpu" {
			fmt.Fprintf(w, "  %8s", "gpu ms")
		}
		fmt.Fprintf(w, "  %11s  %11s\n", "naive mem", "flash mem")
		for i, r := range s.Random {
			fmt.Fprintf(w, "  %6d  %-18s  %9s  %9s", r.N, fmt.Sprintf("%.1e (%.1e) %s", r.Accuracy.MaxErrOut, r.Accuracy.BaselineErrOut, okMark(r.Accuracy.Pass)), fmtSig(r.FlashMS), fmtSig(r.NaiveMS))
			if s.Backend == "gpu" {
				fmt.Fprintf(w, "  %8s", fmtSig(r.MS))
			}
			m := s.Memory[i]
			fmt.Fprintf(w, "  %11s  %11s\n", fmtBytes(m.NaiveBytes), fmtBytes(m.FlashBytes))
		}
	}
	fmt.Fprintf(w, "\ntook %.1fs\n", s.Seconds)
	if s.Report != "" {
		fmt.Fprintf(w, "report: %s\n", s.Report)
	}
}

func okMark(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// pick returns the elements of s at the given indices that exist.
func pick(s []string, idx ...int) []string {
	var out []string
	for _, i := range idx {
		if i < len(s) {
			out = append(out, s[i])
		}
	}
	return out
}
