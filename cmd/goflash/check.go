package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

const checkSynopsis = `List the GPUs (name, compute capability, memory, driver), the FA2 kernel
variant each would run per head dim, and run a quick correctness self-test on
each: GPU results, forward and backward, against a float64 reference by the
FlashAttention-2 tolerance rule (error at most twice a textbook fp16
computation's), for the device's own kernels, their bf16 twins on sm_80 and
newer (held to a textbook bf16 computation), and the Turing (sm_75) kernels
forced through PTX.
Without a GPU it says so and self-tests the CPU backends instead; --device N
names a GPU to check, and one that is not there is an error (exit 2).

The exit status is 1 when any self-test fails.`

// CheckResult is what goflash check found; --json prints it.
type CheckResult struct {
	Meta    Meta          `json:"meta"`
	GPUs    []CheckGPU    `json:"gpus"`
	NoGPU   string        `json:"no_gpu,omitempty"` // why no GPU was checked
	CPU     string        `json:"cpu"`
	Tests   []SelfTestRow `json:"tests"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
	Seconds float64       `json:"seconds"`
}

// CheckGPU is one device and its kernel variants.
type CheckGPU struct {
	Device  DeviceMeta  `json:"device"`
	Kernels []KernelRow `json:"kernels,omitempty"`
	SM75    []KernelRow `json:"sm75_kernels,omitempty"` // the forced Turing path, on a newer GPU
	Error   string      `json:"error,omitempty"`
	// Unsupported: the GPU is older than the kernels' minimum (sm_75), so
	// the library runs on the CPU there; not a failure of the check.
	Unsupported bool `json:"unsupported,omitempty"`
}

// SelfTestRow is one checked problem.
type SelfTestRow struct {
	Target    string   `json:"target"` // "cpu-naive", "cpu-flash", "gpu0", "gpu0-bf16", "gpu0-sm75"
	Direction string   `json:"direction"`
	Case      string   `json:"case"`
	Pass      bool     `json:"pass"`
	MaxErr    errNum   `json:"max_err"`
	BaseErr   errNum   `json:"baseline_err"`
	Precision string   `json:"precision"`
	Failures  []string `json:"failures,omitempty"`
}

type checkOpts struct {
	json    bool
	device  int
	noSM75  bool
	workers int
}

func runCheck(args []string, stdout, stderr io.Writer) error {
	o := checkOpts{}
	fs := newFlags("check", checkSynopsis, stdout)
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout")
	fs.IntVar(&o.device, "device", -1, "check only this GPU ordinal (-1: all)")
	fs.BoolVar(&o.noSM75, "no-sm75", false, "do not test the forced Turing (sm_75) kernels on a newer GPU")
	fs.IntVar(&o.workers, "workers", 0, "CPU goroutines (0: GOMAXPROCS)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.device < -1 || o.workers < 0 {
		return usagef("--device must be >= -1 and --workers >= 0")
	}
	if err := checkWorkers(o.workers); err != nil {
		return err
	}
	res, err := check(o)
	if err != nil {
		return err
	}
	if o.json {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printCheck(stdout, res)
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d of %d self-tests failed", res.Failed, res.Failed+res.Passed)
	}
	return nil
}

// selfTestCases are small problems with ragged edges, GQA, Nq != Nk and
// causal masks, for head dim d: cheap enough for a quick check, odd enough
// to catch indexing and masking bugs.
func selfTestCases(d int) []Case {
	return []Case{
		{Dims: flashattn.Dims{B: 2, Nq: 97, Nk: 97, Hq: 4, Hkv: 2, D: d}, Causal: false},
		{Dims: flashattn.Dims{B: 2, Nq: 97, Nk: 97, Hq: 4, Hkv: 2, D: d}, Causal: true},
		{Dims: flashattn.Dims{B: 1, Nq: 130, Nk: 257, Hq: 2, Hkv: 1, D: d}, Causal: true},
		{Dims: flashattn.Dims{B: 1, Nq: 17, Nk: 1, Hq: 3, Hkv: 3, D: d}, Causal: false},
		{Dims: flashattn.Dims{B: 1, Nq: 100, Nk: 37, Hq: 2, Hkv: 2, D: d}, Causal: true}, // rows 0..62 see no key
	}
}

// check runs the self-tests; an error is a --device that names no GPU of
// those the driver lists.
func check(o checkOpts) (*CheckResult, error) {
	t0 := time.Now()
	res := &CheckResult{Meta: newMeta()}
	res.CPU = cpuDeviceMeta(res.Meta).Name
	gpus, err := listGPUs()
	if err != nil {
		res.NoGPU = err.Error()
	}
	if o.device >= 0 && len(gpus) == 0 {
		// A GPU asked for by number that is not there is an error, not a
		// CPU self-test that passes.
		why := "the driver lists none"
		if err != nil {
			why = err.Error()
		}
		return nil, usagef("--device %d: no GPU to check (%s); without --device the CPU backends are self-tested", o.device, why)
	}
	if o.device >= 0 && len(gpus) > 0 && !slices.ContainsFunc(gpus, func(g DeviceMeta) bool { return g.Ordinal == o.device }) {
		return nil, usagef("--device %d: the driver lists GPUs 0 to %d", o.device, len(gpus)-1)
	}
	usable := 0
	for _, g := range gpus {
		ord := g.Ordinal
		if o.device >= 0 && ord != o.device {
			continue
		}
		cg := CheckGPU{Device: g}
		dev, err := openGPU(ord)
		var ue *flashattn.UnsupportedError
		if errors.As(err, &ue) {
			cg.Error, cg.Unsupported = err.Error(), true
			res.GPUs = append(res.GPUs, cg)
			continue
		}
		if err != nil {
			cg.Error = err.Error()
			res.Failed++
			res.GPUs = append(res.GPUs, cg)
			continue
		}
		usable++
		paths := []int{0} // kernel paths: the device's own, then the forced Turing one
		if !o.noSM75 && g.Arch > 75 {
			paths = append(paths, 75)
		}
		for _, path := range paths {
			target := fmt.Sprintf("gpu%d", ord)
			kr, err := dev.Kernels(path)
			if path == 75 {
				target, cg.SM75 = target+"-sm75", kr
			} else {
				cg.Kernels = kr
			}
			// A kernel the table lists that does not load fails the check.
			if err != nil {
				cg.Error = strings.TrimPrefix(cg.Error+"; "+target+": "+err.Error(), "; ")
				res.add(SelfTestRow{Target: target, Direction: "load", Case: "kernel table", Precision: "fp16", Failures: []string{oneLine(err.Error())}})
			}
			for _, k := range kr {
				if k.Error != "" {
					res.add(SelfTestRow{Target: target, Direction: "load", Case: fmt.Sprintf("D%d causal=%t", k.HeadDim, k.Causal), Precision: "fp16", Failures: []string{k.Error}})
				}
			}
			for _, d := range headDimsOf(kr) {
				for _, c := range selfTestCases(d) {
					res.add(selfTest(target, attntest.FP16, gpuPasses(dev, path, flashattn.FP16), c)...)
				}
			}
			// bf16 (sm_80 and newer, its own kernels at the same head dims:
			// on an H100/H200 the Hopper forward's bf16 twins).
			if path == 0 && g.Arch >= 80 {
				for _, d := range headDimsOf(kr) {
					for _, c := range selfTestCases(d) {
						res.add(selfTest(target+"-bf16", attntest.BF16, gpuPasses(dev, path, flashattn.BF16), c)...)
					}
				}
			}
		}
		dev.Close()
		res.GPUs = append(res.GPUs, cg)
	}
	if o.device >= 0 && len(res.GPUs) == 0 && res.NoGPU == "" {
		res.NoGPU = fmt.Sprintf("no GPU with ordinal %d", o.device)
	}
	if usable == 0 {
		// No usable GPU: the CPU backends are what this machine runs.
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			for _, d := range []int{16, 64} {
				for _, c := range selfTestCases(d) {
					res.add(selfTest(be.String(), attntest.FP32, cpuPasses(be, o.workers), c)...)
				}
			}
		}
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

func (r *CheckResult) add(rows ...SelfTestRow) {
	for _, row := range rows {
		r.Tests = append(r.Tests, row)
		if row.Pass {
			r.Passed++
		} else {
			r.Failed++
		}
	}
}

// headDimsOf lists the head dims that have a kernel, in order.
func headDimsOf(kr []KernelRow) []int {
	var out []int
	for _, k := range kr {
		if k.Error == "" && !k.Causal {
			out = append(out, k.HeadDim)
		}
	}
	return out
}

func testInputs(c Case) (q, k, v, dOut *flashattn.Tensor) {
	d := c.Dims
	seed := uint64(d.B*1000003 + d.Nq*1009 + d.Nk*31 + d.D)
	return flashattn.Random(d.QShape(), seed), flashattn.Random(d.KVShape(), seed+1),
		flashattn.Random(d.KVShape(), seed+2), flashattn.Random(d.QShape(), seed+3)
}

// passes are the forward and backward calls of one self-tested target.
type passes struct {
	forward  func(q, k, v *flashattn.Tensor, causal bool) (*flashattn.Result, error)
	backward func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool) (*flashattn.Grads, error)
}

// gpuPasses runs the passes on dev with the kernels of path on inputs of dt.
func gpuPasses(dev gpuDevice, path int, dt flashattn.DType) passes {
	return passes{
		forward: func(q, k, v *flashattn.Tensor, causal bool) (*flashattn.Result, error) {
			return dev.Forward(q, k, v, causal, path, dt)
		},
		backward: func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool) (*flashattn.Grads, error) {
			return dev.Backward(q, k, v, out, dOut, lse, causal, path, dt)
		},
	}
}

// cpuPasses runs the passes on a CPU backend.
func cpuPasses(be flashattn.Backend, workers int) passes {
	opts := func(causal bool) *flashattn.Options {
		return &flashattn.Options{Causal: causal, Backend: be, Workers: workers}
	}
	return passes{
		forward: func(q, k, v *flashattn.Tensor, causal bool) (*flashattn.Result, error) {
			return flashattn.Forward(q, k, v, opts(causal))
		},
		backward: func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, causal bool) (*flashattn.Grads, error) {
			return flashattn.Backward(q, k, v, out, dOut, lse, opts(causal))
		},
	}
}

// selfTest checks one target forward and backward (from its own forward
// result, as a training step would) against attntest's float64 truth. A
// head dim the target has no backward kernel for gives no backward row:
// that is what the kernel table says, not a failure.
func selfTest(target string, p attntest.Precision, run passes, c Case) []SelfTestRow {
	q, k, v, dOut := testInputs(c)
	fwd := SelfTestRow{Target: target, Direction: dirFwd, Case: c.String(), Precision: p.String()}
	bwd := fwd
	bwd.Direction = dirBwd
	res, err := run.forward(q, k, v, c.Causal)
	if err != nil {
		fwd.Failures = []string{oneLine(err.Error())}
		return []SelfTestRow{fwd}
	}
	scale := 1 / math.Sqrt(float64(c.Dims.D))
	truth := attntest.Reference(q, k, v, dOut, c.Causal, scale)
	base := attntest.Baseline(p, q, k, v, dOut, c.Causal, scale)
	fc := attntest.CompareForward(p, truth, base, res)
	fwd.Pass, fwd.Failures = fc.Pass(), fc.Mismatches
	e, b := fc.MaxErr("Out")
	fwd.MaxErr, fwd.BaseErr = errNum(e), errNum(b)

	g, err := run.backward(q, k, v, res.Out, dOut, res.LSE, c.Causal)
	var ue *flashattn.UnsupportedError
	if errors.As(err, &ue) {
		return []SelfTestRow{fwd}
	}
	if err != nil {
		bwd.Failures = []string{oneLine(err.Error())}
		return []SelfTestRow{fwd, bwd}
	}
	bc := attntest.CompareBackward(p, truth, base, g)
	bwd.Pass, bwd.Failures = bc.Pass(), bc.Mismatches
	e, b = bc.MaxErr()
	bwd.MaxErr, bwd.BaseErr = errNum(e), errNum(b)
	return []SelfTestRow{fwd, bwd}
}

func printCheck(w io.Writer, r *CheckResult) {
	fmt.Fprintf(w, "GoFlash check (%s, commit %s)\n\n", r.Meta.Date, r.Meta.Commit)
	cpuTested := false
	for _, t := range r.Tests {
		cpuTested = cpuTested || strings.HasPrefix(t.Target, "cpu")
	}
	if len(r.GPUs) == 0 {
		fmt.Fprintf(w, "GPUs: none usable (%s)\n", r.NoGPU)
	}
	if cpuTested {
		fmt.Fprintf(w, "CPU:  %s: self-testing the CPU backends instead\n", r.CPU)
	}
	for _, g := range r.GPUs {
		d := g.Device
		fmt.Fprintf(w, "GPU %d: %s, compute capability %s, %s, driver %s\n", d.Ordinal, d.Name, d.Capability, fmtBytes(d.Memory), orDefault(d.Driver, "unknown"))
		if g.Unsupported {
			fmt.Fprintf(w, "  not usable by GoFlash, which runs on the CPU here: %s\n", g.Error)
		} else if g.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", g.Error)
		}
		for _, set := range []struct {
			title string
			rows  []KernelRow
		}{{"kernels (default path)", g.Kernels}, {"kernels (Turing sm_75 path, forced through PTX)", g.SM75}} {
			if len(set.rows) == 0 {
				continue
			}
			fmt.Fprintf(w, "  %s:\n", set.title)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "    D\tcausal\tkernel\tpath\tBr x Bc\twarps\tsmem\tregs\tspill\tbinary")
			for _, k := range set.rows {
				if k.Error != "" {
					fmt.Fprintf(tw, "    %d\t%t\t%s\n", k.HeadDim, k.Causal, k.Error)
					continue
				}
				bin := fmt.Sprintf("sm_%d", k.BinaryArch)
				if k.FromPTX {
					bin += " (JIT from PTX)"
				}
				fmt.Fprintf(tw, "    %d\t%t\t%s\tsm_%d\t%dx%d\t%d\t%s\t%d\t%d B\t%s\n", k.HeadDim, k.Causal, k.Symbol, k.Path, k.Br, k.Bc, k.Warps,
					fmtBytes(int64(k.SmemBytes)), k.Registers, k.LocalBytes, bin)
			}
			tw.Flush()
		}
	}
	fmt.Fprintf(w, "\nself-test against a float64 reference (FA2 rule: error <= 2x the same-precision baseline's, plus a rounding floor):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Tests {
		mark := "ok"
		if !t.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\tmax|err| %.1e\t(%s baseline %.1e)\t%s\n", t.Target, t.Direction, t.Case, t.MaxErr, t.Precision, t.BaseErr, mark)
		for _, f := range t.Failures {
			fmt.Fprintf(tw, "    \t%s\n", f)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d passed, %d failed (%.1fs)\n", r.Passed, r.Failed, r.Seconds)
}
