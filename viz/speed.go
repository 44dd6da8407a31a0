package viz

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
)

// Series with fixed colours (bench owns the names), so one backend looks the
// same in every chart. Other names get colours from a palette in order of
// appearance.
var backendColors = map[string]string{
	bench.SeriesCPUNaive: colGrey, bench.SeriesCPUFlash: colSky, bench.SeriesGPUFlash: colBlue,
	bench.SeriesSDPAFlash: colRed, bench.SeriesSDPACuDNN: colYellow, bench.SeriesSDPAEfficient: colPurple, bench.SeriesSDPAMath: colGreen,
}

var palette = []string{colBlue, colOrange, colGreen, colRed, colPurple, colSky, "#999933", colGrey}

func backendColor(name string, i int) string {
	if c, ok := backendColors[name]; ok {
		return c
	}
	return palette[i%len(palette)]
}

// SpeedPoint is one timed forward pass: Backend at shape (B, N, H, D) with
// Nq = Nk = N and Hq = Hkv = H, causal or not, taking Millis milliseconds
// (median of repeated runs). The CLI and the notebooks fill these, from
// their own runs or from the PyTorch SDPA anchor's JSON.
type SpeedPoint struct {
	Backend    string // a series name (bench.SeriesGPUFlash, ...) or any name
	B, N, H, D int
	Causal     bool
	Millis     float64
	// TFLOPs is the achieved rate; 0 means compute it from Millis and
	// flashattn.Dims.FLOPs (FA2's count: 4*B*H*N*N*D, halved when causal).
	TFLOPs float64
	// Bytes is the memory traffic of the call, for the roofline; 0 means
	// the minimum, Q, K and V read and O written once in fp16.
	Bytes float64
}

// SpeedPointOf is the point of a benchmark row, named by its series
// (bench.SeriesName); it does not look at the row's Status.
func SpeedPointOf(r bench.Row) SpeedPoint {
	return SpeedPoint{Backend: bench.SeriesName(r.Impl), B: r.B, N: r.Nq, H: r.Hq, D: r.D, Causal: r.Causal, Millis: r.MS, TFLOPs: r.TFLOPs}
}

// SpeedPoints are the points of the rows that ran (Status ok, a rate above
// 0) and keep accepts (nil keeps all).
func SpeedPoints(rows []bench.Row, keep func(bench.Row) bool) []SpeedPoint {
	var out []SpeedPoint
	for _, r := range rows {
		if r.Status == bench.StatusOK && r.TFLOPs > 0 && (keep == nil || keep(r)) {
			out = append(out, SpeedPointOf(r))
		}
	}
	return out
}

func (p SpeedPoint) dims() flashattn.Dims {
	return flashattn.Dims{B: max(p.B, 1), Nq: p.N, Nk: p.N, Hq: max(p.H, 1), Hkv: max(p.H, 1), D: p.D}
}

// rate returns TFLOP/s, computing it from Millis when TFLOPs is 0.
func (p SpeedPoint) rate() float64 {
	if p.TFLOPs > 0 {
		return p.TFLOPs
	}
	return p.dims().FLOPs(p.Causal) / (p.Millis * 1e-3) / 1e12
}

// intensity is FLOPs per byte of memory traffic. The minimum traffic scales
// with B*H like the FLOPs, so it does not need them.
func (p SpeedPoint) intensity() float64 {
	d := p.dims()
	bytes := p.Bytes
	if bytes == 0 {
		bytes = 2 * float64(2*d.QShape().Numel()+2*d.KVShape().Numel())
		return d.FLOPs(p.Causal) / bytes
	}
	// Bytes was measured for the caller's B and H.
	return flashattn.Dims{B: p.B, Nq: p.N, Nk: p.N, Hq: p.H, Hkv: p.H, D: p.D}.FLOPs(p.Causal) / bytes
}

func checkSpeed(fn string, points []SpeedPoint) error {
	if len(points) == 0 {
		return &InputError{Func: fn, Arg: "points", Reason: "is empty"}
	}
	for i, p := range points {
		bad := ""
		switch {
		case p.Backend == "":
			bad = "has no backend"
		case p.N <= 0 || p.D <= 0 || p.B < 0 || p.H < 0:
			bad = "has a non-positive N or D"
		case !finite(p.Millis) || !finite(p.TFLOPs) || !finite(p.Bytes) || p.Millis < 0 || p.TFLOPs < 0 || p.Bytes < 0:
			bad = "has a negative or non-finite number"
		case p.TFLOPs == 0 && (p.Millis == 0 || p.B == 0 || p.H == 0):
			bad = "needs TFLOPs, or Millis with B and H"
		case p.Bytes > 0 && (p.B == 0 || p.H == 0):
			bad = "has Bytes without B and H"
		case !finite(p.rate()):
			bad = "gives a rate that is not finite (Millis too small)"
		}
		if bad != "" {
			return &InputError{Func: fn, Arg: fmt.Sprintf("points[%d]", i), Reason: fmt.Sprintf("%s: %+v", bad, p)}
		}
	}
	return nil
}

// speedSeries groups points by backend and, when the points mix them, by D
// and causality, in order of first appearance; each group is sorted by N.
type speedSeries struct {
	name    string
	backend string
	points  []SpeedPoint
}

func groupSpeed(points []SpeedPoint) []speedSeries {
	ds, cs := map[int]bool{}, map[bool]bool{}
	for _, p := range points {
		ds[p.D], cs[p.Causal] = true, true
	}
	var out []speedSeries
	idx := map[string]int{}
	for _, p := range points {
		name := p.Backend
		if len(ds) > 1 {
			name += fmt.Sprintf(" D=%d", p.D)
		}
		if len(cs) > 1 {
			if p.Causal {
				name += " causal"
			} else {
				name += " full"
			}
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, speedSeries{name: name, backend: p.Backend})
		}
		out[i].points = append(out[i].points, p)
	}
	for _, s := range out {
		sort.SliceStable(s.points, func(a, b int) bool { return s.points[a].N < s.points[b].N })
	}
	return out
}

// shapeText describes a point for tooltips.
func shapeText(p SpeedPoint) string {
	s := fmt.Sprintf("N=%d D=%d", p.N, p.D)
	if p.B > 0 && p.H > 0 {
		s = fmt.Sprintf("B=%d H=%d ", p.B, p.H) + s
	}
	if p.Causal {
		s += " causal"
	}
	return s
}

// speedTooltip shows the text carried in each point's fourth value.
var speedTooltip = opts.Tooltip{Show: opts.Bool(true), Trigger: "item", Formatter: js(
	"function (p) { return '<b>' + echarts.format.encodeHTML(p.seriesName) + '</b><br/>' + echarts.format.encodeHTML(String(p.value[2])); }")}

// logAxisFor reports whether values spread over more than a factor 30, when
// a log axis reads better.
func logAxisFor(vals []float64) bool {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vals {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	return hi > 30*lo
}

// SpeedOptions are the settings of the Speed and Speedup charts.
type SpeedOptions struct {
	Title string
	// Subtitle says where the numbers come from (GPU, driver, date); it is
	// shown under the title.
	Subtitle string
	// LinearY forces a linear y axis; by default it is logarithmic when the
	// values spread over more than a factor 30 (CPU and GPU together).
	LinearY bool
	// Fallbacks are Speedup's baselines, in order, for when its baseline has
	// no points (PyTorch has no flash backend on a T4: SDPAEfficient); the
	// subtitle then says which baseline was drawn and why.
	Fallbacks []string
}

func newSpeedChart(kind, title, sub, yName string, logY bool) *charts.Line {
	c := charts.NewLine()
	yType := "value"
	if logY {
		yType = "log"
	}
	c.SetGlobalOptions(baseOpts(kind, title, sub, 0)...)
	c.SetGlobalOptions(
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "5px"}),
		charts.WithTooltipOpts(speedTooltip),
		charts.WithGridOpts(opts.Grid{Left: "20px", Right: "40px", Top: "95px", Bottom: "60px", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "sequence length N", NameLocation: "middle", NameGap: 28,
			AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: yType, Name: yName, AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}}),
	)
	setLogBase(c, 2, 10)
	return c
}

// Speed draws achieved TFLOP/s against N, one line per backend (and per D
// or causality when the points mix them); tooltips give the exact shape, time
// and rate.
func Speed(points []SpeedPoint, o SpeedOptions) (*charts.Line, error) {
	if err := checkSpeed("Speed", points); err != nil {
		return nil, err
	}
	var vals []float64
	for _, p := range points {
		vals = append(vals, p.rate())
	}
	title := o.Title
	if title == "" {
		title = "Forward pass throughput"
	}
	c := newSpeedChart("speed", title, o.Subtitle, "TFLOP/s", !o.LinearY && logAxisFor(vals))
	for i, s := range groupSpeed(points) {
		data := make([]opts.LineData, len(s.points))
		for k, p := range s.points {
			r := p.rate()
			text := fmt.Sprintf("%s: %.4g TFLOP/s", shapeText(p), r)
			if p.Millis > 0 {
				text = fmt.Sprintf("%s: %.4g ms, %.4g TFLOP/s", shapeText(p), p.Millis, r)
			}
			data[k] = opts.LineData{Value: [3]any{p.N, r, text}}
		}
		c.AddSeries(clean(s.name), data, look{color: backendColor(s.backend, i), symbol: "circle", size: 8, line: "solid"}.opt())
	}
	return c, nil
}

// Speedup draws, for every backend but baseline, how many times faster it
// is than baseline at the same shape (B, N, H, D, causal): the ratio of
// their rates, which is the ratio of their times. A dashed line marks 1.
// Shapes the baseline lacks are left out; an error says so when nothing is
// left.
func Speedup(points []SpeedPoint, baseline string, o SpeedOptions) (*charts.Line, error) {
	const fn = "Speedup"
	if err := checkSpeed(fn, points); err != nil {
		return nil, err
	}
	type key struct {
		b, n, h, d int
		causal     bool
	}
	base := map[key]SpeedPoint{}
	sub := o.Subtitle
	for i, cand := range append([]string{baseline}, o.Fallbacks...) {
		for _, p := range points {
			if p.Backend != cand {
				continue
			}
			k := key{p.B, p.N, p.H, p.D, p.Causal}
			if _, twice := base[k]; twice {
				return nil, &InputError{Func: fn, Arg: "points", Reason: fmt.Sprintf("give baseline %q two points of one shape (B %d, N %d, H %d, D %d, causal %v): a speedup needs one", cand, p.B, p.N, p.H, p.D, p.Causal)}
			}
			base[k] = p
		}
		if len(base) > 0 {
			if i > 0 {
				sub = strings.TrimPrefix(sub+"\n", "\n") + fmt.Sprintf("baseline %s: %s has no points", clean(cand), clean(baseline))
				baseline = cand
			}
			break
		}
	}
	if len(base) == 0 {
		return nil, &InputError{Func: fn, Arg: "baseline", Reason: fmt.Sprintf("%q has no points (nor fallbacks %q)", baseline, o.Fallbacks)}
	}
	var others []SpeedPoint
	var vals []float64
	for _, p := range points {
		b, ok := base[key{p.B, p.N, p.H, p.D, p.Causal}]
		if p.Backend == baseline || !ok {
			continue
		}
		others = append(others, p)
		vals = append(vals, p.rate()/b.rate())
	}
	if len(others) == 0 {
		return nil, &InputError{Func: fn, Arg: "points", Reason: fmt.Sprintf("have no shape in common with baseline %q", baseline)}
	}
	title := o.Title
	if title == "" {
		title = "Speedup over " + baseline
	}
	c := newSpeedChart("speedup", title, sub, "speedup (x)", !o.LinearY && logAxisFor(append(vals, 1)))
	lo, hi := math.MaxInt, 0
	for i, s := range groupSpeed(others) {
		data := make([]opts.LineData, len(s.points))
		for k, p := range s.points {
			b := base[key{p.B, p.N, p.H, p.D, p.Causal}]
			r := p.rate() / b.rate()
			how := fmt.Sprintf("%.4g vs %.4g TFLOP/s", p.rate(), b.rate())
			if p.Millis > 0 && b.Millis > 0 {
				how = fmt.Sprintf("%.4g ms vs %.4g ms", p.Millis, b.Millis)
			}
			data[k] = opts.LineData{Value: [3]any{p.N, r, fmt.Sprintf("%s: %s (%s): %.3gx", shapeText(p), how, clean(baseline), r)}}
			lo, hi = min(lo, p.N), max(hi, p.N)
		}
		c.AddSeries(clean(s.name), data, look{color: backendColor(s.backend, i), symbol: "circle", size: 8, line: "solid"}.opt())
	}
	c.AddSeries(clean(baseline)+" (= 1)", []opts.LineData{
		{Value: [3]any{lo, 1, "baseline"}}, {Value: [3]any{hi, 1, "baseline"}},
	}, look{color: colBlack, symbol: "none", line: "dashed", width: 1.5}.opt())
	return c, nil
}

// GPUPeak is what a GPU can do at best, from its data sheet or a
// measurement: dense fp16 tensor-core TFLOP/s and memory bandwidth in GB/s
// (1e9 bytes per second).
type GPUPeak struct {
	Name   string
	TFLOPs float64
	GBps   float64
}

// Roofline draws the points on a roofline: x is arithmetic intensity (FLOPs
// per byte of memory traffic, SpeedPoint.Bytes), y achieved TFLOP/s, both
// logarithmic, under the roof min(peak, bandwidth x intensity). Tooltips
// give the fraction of the roof reached.
func Roofline(points []SpeedPoint, peak GPUPeak, o SpeedOptions) (*charts.Line, error) {
	const fn = "Roofline"
	if err := checkSpeed(fn, points); err != nil {
		return nil, err
	}
	if !finite(peak.TFLOPs) || !finite(peak.GBps) || peak.TFLOPs <= 0 || peak.GBps <= 0 {
		return nil, &InputError{Func: fn, Arg: "peak", Reason: fmt.Sprintf("is %+v (want TFLOPs and GBps > 0)", peak)}
	}
	roof := func(i float64) float64 { return math.Min(peak.TFLOPs, peak.GBps*1e9*i/1e12) }
	ridge := peak.TFLOPs * 1e12 / (peak.GBps * 1e9)
	lo, hi := ridge, ridge
	for _, p := range points {
		lo, hi = math.Min(lo, p.intensity()), math.Max(hi, p.intensity())
	}
	lo, hi = lo/4, hi*4
	title := o.Title
	if title == "" {
		title = "Roofline"
	}
	name := peak.Name
	if name == "" {
		name = "GPU"
	}
	sub := fmt.Sprintf("%s: peak %.4g TFLOP/s, %.4g GB/s, ridge at %.3g FLOP/byte", name, peak.TFLOPs, peak.GBps, ridge)
	for _, p := range points {
		if p.Bytes == 0 {
			sub += "; intensity: least traffic (Q, K, V in, O out, fp16)"
			break
		}
	}
	if o.Subtitle != "" {
		sub = o.Subtitle + "\n" + sub
	}
	c := charts.NewLine()
	c.SetGlobalOptions(baseOpts("roofline", title, sub, 0)...)
	c.SetGlobalOptions(
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "5px"}),
		charts.WithTooltipOpts(speedTooltip),
		charts.WithGridOpts(opts.Grid{Left: "20px", Right: "40px", Top: "95px", Bottom: "60px", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "arithmetic intensity (FLOP/byte)", NameLocation: "middle", NameGap: 28,
			Min: niceDown(lo), Max: niceUp(hi), AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "TFLOP/s", AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}}),
	)
	setLogBase(c, 10, 10)
	lo, hi = niceDown(lo), niceUp(hi)
	roofPts := []float64{lo, ridge, hi}
	if ridge <= lo {
		roofPts = []float64{lo, hi}
	}
	rd := make([]opts.LineData, len(roofPts))
	for i, x := range roofPts {
		rd[i] = opts.LineData{Value: [3]any{x, roof(x), fmt.Sprintf("roof at %.3g FLOP/byte: %.4g TFLOP/s", x, roof(x))}}
	}
	c.AddSeries(clean(name)+" roof", rd, look{color: colBlack, symbol: "none", line: "solid", width: 2.5}.opt())
	for i, s := range groupSpeed(points) {
		data := make([]opts.LineData, len(s.points))
		for k, p := range s.points {
			x, r := p.intensity(), p.rate()
			data[k] = opts.LineData{Value: [3]any{x, r, fmt.Sprintf("%s: %.4g FLOP/byte, %.4g TFLOP/s = %.1f%% of the roof", shapeText(p), x, r, 100*r/roof(x))}}
		}
		c.AddSeries(clean(s.name), data, look{color: backendColor(s.backend, i), symbol: "circle", size: 9, line: "dotted", width: 1}.opt())
	}
	return c, nil
}

// niceDown and niceUp round to powers of 10 so log axes start and end on a
// labelled tick.
func niceDown(x float64) float64 { return math.Pow(10, math.Floor(math.Log10(x))) }
func niceUp(x float64) float64   { return math.Pow(10, math.Ceil(math.Log10(x))) }
