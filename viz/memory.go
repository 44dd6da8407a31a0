package viz

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/flashattn"
)

// MemPoint is one measured memory figure: the bytes a forward call of
// backend needed at sequence length N (Nq = Nk = N), for example the Go heap
// allocated during a CPU call (runtime.MemStats TotalAlloc) or the peak
// device memory of a GPU call minus what was in use before it (then set
// MemoryOptions.WithoutInputs). The CLI and the notebooks fill these.
type MemPoint struct {
	Backend string // e.g. "cpu-naive", "cpu-flash", "gpu-flash" (see Speed)
	N       int
	Bytes   float64
}

// AttentionBytes is the memory one forward pass needs, by formula, derived
// from d: both algorithms hold Q, K, V and O (elemBytes per element: 2 for
// fp16, 4 for float32); naive attention adds the Nq x Nk matrices S and P of
// scoreHeads (batch, head) pairs at once (B*Hq when batched, as on a GPU or
// in PyTorch; 1 for flashattn's CPUNaive, which goes head by head), flash
// attention adds only the float32 log-sum-exp of each row. Flash's working
// tiles are O(Br*Bc) per worker, independent of N, and left out. Subtract
// InputBytes for what a call allocates beyond its inputs.
func AttentionBytes(d flashattn.Dims, elemBytes, scoreHeads int) (naive, flash float64) {
	e := float64(elemBytes)
	io := InputBytes(d, elemBytes) + e*float64(d.QShape().Numel())
	naive = io + 2*e*float64(scoreHeads)*float64(d.Nq)*float64(d.Nk)
	flash = io + 4*float64(d.LSELen())
	return naive, flash
}

// InputBytes is the memory of Q, K and V.
func InputBytes(d flashattn.Dims, elemBytes int) float64 {
	return float64(elemBytes) * float64(d.QShape().Numel()+2*d.KVShape().Numel())
}

// MemoryOptions are the settings of the Memory chart. B, H and D give the
// shape of the formula curves (Hq = Hkv = H, Nq = Nk = N); leave B zero to
// draw measurements only.
type MemoryOptions struct {
	Title      string
	Subtitle   string // where the measurements come from; shown above the formula's description
	B, H, D    int
	ElemBytes  int   // bytes per element for the formula (0: 4, float32)
	ScoreHeads int   // (batch, head) pairs whose S and P naive attention holds at once (0: B*H)
	FormulaN   []int // sequence lengths for the formula (nil: powers of 2 over the measured range, extended past the capacity line)
	// WithoutInputs leaves Q, K and V out of the formula, to compare with
	// measurements of what a call allocates beyond its inputs.
	WithoutInputs bool
	// CapacityBytes, when > 0, draws a horizontal line at the memory of a
	// device, labelled CapacityLabel (e.g. "T4: 16 GB").
	CapacityBytes float64
	CapacityLabel string
}

const bytesFormatter = "function (v) { var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'], i = 0; v = Number(v); while (v >= 1024 && i < 6) { v /= 1024; i++; } return (+v.toPrecision(3)) + ' ' + u[i]; }"

// Memory draws the memory of naive and flash attention forward calls
// against the sequence length on log-log axes: measured points per backend (solid, with
// markers) and the AttentionBytes formulas (dashed), with a device's capacity
// line: naive attention grows as N^2 and crosses it, flash as N.
func Memory(points []MemPoint, o MemoryOptions) (*charts.Line, error) {
	const fn = "Memory"
	if len(points) == 0 && o.B <= 0 {
		return nil, &InputError{Func: fn, Arg: "points", Reason: "is empty and MemoryOptions has no shape for the formula"}
	}
	if o.B < 0 || o.B > 0 && (o.H <= 0 || o.D <= 0) {
		return nil, &InputError{Func: fn, Arg: "MemoryOptions", Reason: fmt.Sprintf("has B=%d H=%d D=%d (want all > 0, or B = 0 for no formula)", o.B, o.H, o.D)}
	}
	if o.CapacityBytes < 0 || !finite(o.CapacityBytes) {
		return nil, &InputError{Func: fn, Arg: "MemoryOptions.CapacityBytes", Reason: fmt.Sprintf("is %v", o.CapacityBytes)}
	}
	if o.ElemBytes < 0 || o.ScoreHeads < 0 {
		return nil, &InputError{Func: fn, Arg: "MemoryOptions", Reason: fmt.Sprintf("has ElemBytes=%d ScoreHeads=%d (want >= 0; 0: the default)", o.ElemBytes, o.ScoreHeads)}
	}
	elem := o.ElemBytes
	if elem == 0 {
		elem = 4
	}
	heads := o.ScoreHeads
	if heads == 0 {
		heads = o.B * o.H
	}
	lo, hi := math.MaxInt, 0
	for i, p := range points {
		if p.N <= 0 || !finite(p.Bytes) || p.Bytes <= 0 || p.Backend == "" {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("points[%d]", i), Reason: fmt.Sprintf("is %+v (want a backend, N > 0, bytes > 0)", p)}
		}
		lo, hi = min(lo, p.N), max(hi, p.N)
	}
	c := charts.NewLine()
	title := o.Title
	if title == "" {
		title = "Memory of one forward pass"
	}
	sub := "log-log: naive attention stores Nq x Nk scores, flash attention O(N)"
	if o.B > 0 {
		what := "Q, K, V, O"
		if o.WithoutInputs {
			what = "O"
		}
		sub = fmt.Sprintf("formula for B=%d, H=%d, D=%d, %d-byte elements: %s, + S and P of %d head(s) (naive) or LSE (flash)", o.B, o.H, o.D, elem, what, heads)
	}
	if o.Subtitle != "" {
		sub = o.Subtitle + "\n" + sub
	}
	c.SetGlobalOptions(baseOpts("memory", title, sub, 0)...)
	c.SetGlobalOptions(
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "5px"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item", Formatter: js(
			"function (p) { var f = " + bytesFormatter + "; return echarts.format.encodeHTML(p.seriesName) + '<br/>N = ' + p.value[0] + ': <b>' + f(p.value[1]) + '</b> (' + Math.round(p.value[1]).toLocaleString('en-US') + ' bytes)'; }")}),
		charts.WithGridOpts(opts.Grid{Left: "20px", Right: "40px", Top: "90px", Bottom: "70px", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "sequence length N", NameLocation: "middle", NameGap: 28,
			AxisLabel: &opts.AxisLabel{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "bytes", AxisLabel: &opts.AxisLabel{Show: opts.Bool(true), Formatter: js(bytesFormatter)}}),
	)
	setLogBase(c, 2, 2)

	// Measured: one series per backend, in order of first appearance.
	order, byBackend := groupMem(points)
	for i, b := range order {
		ps := byBackend[b]
		sort.Slice(ps, func(a, b int) bool { return ps[a].N < ps[b].N })
		data := make([]opts.LineData, len(ps))
		for k, p := range ps {
			data[k] = opts.LineData{Value: [2]float64{float64(p.N), p.Bytes}}
		}
		c.AddSeries(clean(b)+" (measured)", data, look{color: backendColor(b, i), symbol: "circle", size: 8, line: "solid"}.opt())
	}

	var ns []int
	if o.B > 0 {
		ns = o.FormulaN
		if ns == nil {
			ns = formulaRange(lo, hi, func(n int) float64 {
				nv, _ := o.formula(n, elem, heads)
				return nv
			}, o.CapacityBytes)
		}
		nd := make([]opts.LineData, len(ns))
		fd := make([]opts.LineData, len(ns))
		for i, n := range ns {
			if n <= 0 {
				return nil, &InputError{Func: fn, Arg: fmt.Sprintf("MemoryOptions.FormulaN[%d]", i), Reason: fmt.Sprintf("is %d", n)}
			}
			nv, fv := o.formula(n, elem, heads)
			nd[i] = opts.LineData{Value: [2]float64{float64(n), nv}}
			fd[i] = opts.LineData{Value: [2]float64{float64(n), fv}}
		}
		c.AddSeries("naive (formula)", nd, look{color: "#555555", symbol: "none", line: "dashed"}.opt())
		c.AddSeries("flash (formula)", fd, look{color: "#555555", symbol: "none", line: "dotted", width: 2.5}.opt())
	}
	if o.CapacityBytes > 0 {
		a, b := lo, hi
		for _, n := range ns {
			a, b = min(a, n), max(b, n)
		}
		name := o.CapacityLabel
		if name == "" {
			name = "device capacity"
		}
		c.AddSeries(clean(name), []opts.LineData{
			{Value: [2]float64{float64(a), o.CapacityBytes}},
			{Value: [2]float64{float64(b), o.CapacityBytes}},
		}, look{color: colBlack, symbol: "none", line: "solid", width: 3}.opt())
	}
	return c, nil
}

func (o MemoryOptions) formula(n, elem, heads int) (naive, flash float64) {
	d := flashattn.Dims{B: o.B, Nq: n, Nk: n, Hq: o.H, Hkv: o.H, D: o.D}
	naive, flash = AttentionBytes(d, elem, heads)
	if o.WithoutInputs {
		in := InputBytes(d, elem)
		naive, flash = naive-in, flash-in
	}
	return naive, flash
}

// formulaRange is the powers of 2 from below lo to above hi, extended until
// f passes 4 x capacity (at most 2^22) so the chart shows where naive
// attention stops fitting.
func formulaRange(lo, hi int, f func(int) float64, capacity float64) []int {
	if hi == 0 {
		lo, hi = 128, 16384
	}
	n := 1
	for n*2 <= lo {
		n *= 2
	}
	var ns []int
	for ; n <= 1<<22; n *= 2 {
		ns = append(ns, n)
		if n >= hi && (capacity <= 0 || f(n) > 4*capacity) {
			break
		}
	}
	return ns
}

func groupMem(points []MemPoint) ([]string, map[string][]MemPoint) {
	var order []string
	m := map[string][]MemPoint{}
	for _, p := range points {
		if _, ok := m[p.Backend]; !ok {
			order = append(order, p.Backend)
		}
		m[p.Backend] = append(m[p.Backend], p)
	}
	return order, m
}

// setLogBase sets the log base of the log-typed x and y axes (go-echarts
// has no field for it).
func setLogBase(c *charts.Line, xBase, yBase int) {
	c.Accept(logBases{x: xBase, y: yBase})
}

type logBases struct {
	charts.BaseConfigurationVisitor
	x, y int
}

// Visit adds logBase to the log axes of the finished option.
func (l logBases) Visit(o map[string]any) {
	for key, base := range map[string]int{"xAxis": l.x, "yAxis": l.y} {
		b, err := json.Marshal(o[key])
		if err != nil {
			continue
		}
		var axes []map[string]any
		if json.Unmarshal(b, &axes) != nil {
			continue
		}
		for _, a := range axes {
			if a["type"] == "log" {
				a["logBase"] = base
			}
		}
		o[key] = axes
	}
}
