package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// goflash bench --ladder: the kernel ladder of tutorial chapter 6, every rung
// checked against attntest's rule and then timed, and with --rung-source a
// rung compiled at run time (NVRTC) from an edited source beside them.

// ladderCheck is the problem every rung passes before it is timed: causal,
// grouped-query, and 300 rows (a multiple of no tile), as notebook 06 checks.
var ladderCheck = Case{Dims: flashattn.Dims{B: 1, Nq: 300, Nk: 300, Hq: 4, Hkv: 2, D: 64}, Causal: true}

// ladderSeqLens are --ladder's sequence lengths when --seqlens is not given;
// its head dim is the rungs' one, 64.
var ladderSeqLens = intList{1024, 2048, 4096, 8192}

// rungEdit is --rung-source's R=FILE: rung R compiled from FILE's text.
type rungEdit struct {
	rung      int
	file, src string
}

// parseRungSource reads --rung-source R=FILE.
func parseRungSource(s string) (*rungEdit, error) {
	r, file, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(r)
	steps := flashattn.Ladder()
	if !ok || err != nil || n < 1 || n > len(steps) || file == "" {
		return nil, usagef("--rung-source %q: want R=FILE, R a ladder rung 1 to %d", s, len(steps))
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef("--rung-source: %v", err)
	}
	return &rungEdit{rung: n, file: file, src: string(src)}, nil
}

// checkLadderOpts refuses what --ladder cannot time: it is the fp16 forward
// of the rungs' head dim on a GPU.
func checkLadderOpts(o benchOpts) error {
	switch {
	case o.direction != "fwd":
		return usagef("--ladder times the forward kernels only (--direction %s)", o.direction)
	case o.dtype != "fp16":
		return usagef("--ladder: the ladder's rungs are fp16 kernels (--dtype %s)", o.dtype)
	case o.decode || o.varlen != "" || o.mods.any() || o.withSM75 || o.withSM80 || o.deterministic:
		return usagef("--ladder goes with none of --decode, --varlen, --window, --softcap, --alibi, --with-sm75, --with-sm80, --deterministic")
	}
	for _, d := range o.shapes.headDims {
		if d != ladderCheck.Dims.D {
			return usagef("--ladder: the ladder's rungs have head dim %d only (--headdims %d)", ladderCheck.Dims.D, d)
		}
	}
	return nil
}

// ladderImpls are --ladder's implementations: each rung of the ladder on
// the kernel path the run uses (the sm_80 kernels on an sm_90 GPU, whose
// default forward is another family), the shipped rung under the GPU
// line's name, and the edited rung when there is one.
func ladderImpls(o benchOpts, res *BenchResult, gpu gpuDevice, reps, warmup int) []benchImpl {
	path := o.forceArch
	if path == 0 && res.Device.Arch >= 90 {
		path = 80
		res.Notes = append(res.Notes, "the ladder climbs the FA2 kernels: on this sm_90 GPU they run on the sm_80 path (--force-arch 80), whose shipped forward is the last rung")
	}
	steps := flashattn.Ladder()
	var impls []benchImpl
	add := func(name string, rung int, src string) {
		impls = append(impls, benchImpl{name, func(_ context.Context, c Case, _ string) Row {
			r := benchRung(gpu, c, path, rung, src, warmup, reps)
			r.Impl = name
			return r
		}})
	}
	for _, s := range steps {
		name := bench.ImplRung(s.Rung)
		if s.Rung == len(steps) {
			name = gpuImplName(path, res.Device.Arch)
		}
		add(name, s.Rung, "")
	}
	if e := o.rungEdit; e != nil {
		add(bench.ImplRungEdit, e.rung, e.src)
		res.Notes = append(res.Notes, fmt.Sprintf("%s: rung %d compiled with NVRTC from %s", bench.ImplRungEdit, e.rung, e.file))
	}
	return impls
}

// benchRung checks rung (src: compiled from that source) on ladderCheck and
// times it on c; a rung that fails the check is not timed.
func benchRung(gpu gpuDevice, c Case, path, rung int, src string, warmup, reps int) Row {
	row := Row{Direction: dirFwd, Shape: bench.ShapeOf(c.Dims, c.Causal), FLOPs: c.Dims.FLOPs(c.Causal)}
	restore, err := gpu.UseRung(path, rung, src)
	if err != nil {
		return failed(row, err)
	}
	defer restore()
	used, err := checkRung(gpu, path)
	if err != nil {
		return failed(row, err)
	}
	r := gpu.Bench(c, dirFwd, path, false, flashattn.FP16, scoreMods{}, warmup, reps)
	r.ErrUsed = used
	if r.Status != statusOK {
		return r
	}
	k, err := gpu.KernelStats(c)
	if err != nil {
		return failed(row, err)
	}
	r.Registers, r.SmemBytes, r.Occupancy = k.Registers, k.SmemPerCTA(), k.Occupancy
	if k.Symbol != "" {
		r.Kernel = k.Symbol
	}
	return r
}

// ladderProblem is ladderCheck's inputs, float64 truth and fp16 baseline,
// computed once: every rung and case is checked on them.
var ladderProblem = sync.OnceValue(func() (p struct {
	q, k, v     *flashattn.Tensor
	truth, base *attntest.Ref
}) {
	c := ladderCheck
	p.q, p.k, p.v, _ = testInputs(c)
	scale := 1 / math.Sqrt(float64(c.Dims.D))
	p.truth = attntest.Reference(p.q, p.k, p.v, nil, c.Causal, scale)
	p.base = attntest.Baseline(attntest.FP16, p.q, p.k, p.v, nil, c.Causal, scale)
	return p
})

// checkRung runs the forward gpu runs now on ladderCheck and returns the
// share of the allowed error (attntest's rule) its output used, or an error
// naming what failed.
func checkRung(gpu gpuDevice, path int) (float64, error) {
	c, p := ladderCheck, ladderProblem()
	res, err := gpu.Forward(p.q, p.k, p.v, c.Causal, path, flashattn.FP16)
	if err != nil {
		return 0, err
	}
	cmp := attntest.CompareForward(attntest.FP16, p.truth, p.base, res)
	if !cmp.Pass() {
		return 0, fmt.Errorf("fails the check on %s: %s", c, strings.Join(cmp.Mismatches, "; "))
	}
	// The output's share: the LSE is float32 in the kernels and the
	// baseline alike, so its share is about 1/2 for every rung.
	for _, x := range cmp.Quantities {
		if allowed := 2*x.BaselineErr + x.Floor; x.Name == "Out" && allowed > 0 {
			return x.MaxErr / allowed, nil
		}
	}
	return 0, fmt.Errorf("the check of %s compared no output", c)
}
