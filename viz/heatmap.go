package viz

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/flashattn"
)

// heatColors is a light-to-dark blue ramp: zero weight stays near white so
// masked (zero) cells read as empty.
var heatColors = []string{"#f7fbff", "#c6dbef", "#6baed6", "#2171b5", "#08306b"}

// maxLabelledCells is the largest heatmap whose cells carry their value.
const maxLabelledCells = 144

// MaxHeatCells bounds the cells of one heatmap chart (a matrix, the heads of
// AttentionHeads together, a Tiling grid): a page holds about 35 bytes per
// cell and a browser draws 256 x 256 of them in a few seconds, but a
// 2048 x 2048 matrix makes a 139 MB page that does not draw. Pool a larger
// matrix (its Br x Bc blocks' maxima, say) before drawing it.
const MaxHeatCells = 256 * 256

func checkCells(fn, arg string, cells int) error {
	if cells > MaxHeatCells {
		return &InputError{Func: fn, Arg: arg, Reason: fmt.Sprintf("has %d cells: one chart draws at most MaxHeatCells (%d); pool it into blocks first", cells, MaxHeatCells)}
	}
	return nil
}

// checkMatrix checks that w is a non-empty rows x cols matrix of finite,
// non-negative values and returns its largest value.
func checkMatrix(fn, arg string, w [][]float64) (rows, cols int, maxv float64, err error) {
	if len(w) == 0 || len(w[0]) == 0 {
		return 0, 0, 0, &InputError{Func: fn, Arg: arg, Reason: "is empty"}
	}
	rows, cols = len(w), len(w[0])
	if err := checkCells(fn, arg, rows*cols); err != nil {
		return 0, 0, 0, err
	}
	for i, r := range w {
		if len(r) != cols {
			return 0, 0, 0, &InputError{Func: fn, Arg: fmt.Sprintf("%s[%d]", arg, i), Reason: fmt.Sprintf("has %d columns, row 0 has %d", len(r), cols)}
		}
		for j, x := range r {
			if !finite(x) || x < 0 {
				return 0, 0, 0, &InputError{Func: fn, Arg: fmt.Sprintf("%s[%d][%d]", arg, i, j), Reason: fmt.Sprintf("is %v (want a finite weight >= 0)", x)}
			}
			maxv = math.Max(maxv, x)
		}
	}
	return rows, cols, maxv, nil
}

// rowsSumToOne reports whether every row of w sums to 1 (to 1e-6).
func rowsSumToOne(w [][]float64) bool {
	for _, r := range w {
		sum := 0.0
		for _, x := range r {
			sum += x
		}
		if math.Abs(sum-1) > 1e-6 {
			return false
		}
	}
	return true
}

// axisLabels returns labels, or "0", "1", ... when labels is nil.
func axisLabels(fn, arg string, labels []string, n int) ([]string, error) {
	if labels == nil {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(i)
		}
		return out, nil
	}
	if len(labels) != n {
		return nil, &InputError{Func: fn, Arg: arg, Reason: fmt.Sprintf("has %d labels for %d positions", len(labels), n)}
	}
	return cleanAll(labels), nil
}

// round6 keeps 6 significant digits: plenty for a colour, and it keeps the
// HTML small.
func round6(x float64) float64 {
	y, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	return y
}

func heatData(w [][]float64) []opts.HeatMapData {
	data := make([]opts.HeatMapData, 0, len(w)*len(w[0]))
	for i, r := range w {
		for j, x := range r {
			// [x = key j, y = query i, weight]
			data = append(data, opts.HeatMapData{Value: [3]any{j, i, round6(x)}})
		}
	}
	return data
}

func heatTooltip(queries, keys []string, heads []string) opts.Tooltip {
	if heads == nil {
		heads = []string{}
	}
	return opts.Tooltip{Show: opts.Bool(true), Formatter: js(
		"function (p) { var q = " + jsValue(queries) + ", k = " + jsValue(keys) + ", h = " + jsValue(heads) +
			", e = echarts.format.encodeHTML, v = p.value;" +
			" return (h.length ? e(h[p.seriesIndex]) + '<br/>' : '') + 'query ' + v[1] + ' <b>' + e(q[v[1]]) + '</b> &rarr; key ' + v[0] + ' <b>' + e(k[v[0]]) + '</b><br/>weight ' + v[2].toPrecision(4); }")}
}

func heatVisualMap(maxv float64) opts.VisualMap {
	if maxv <= 0 {
		maxv = 1
	}
	return opts.VisualMap{Type: "continuous", Calculable: opts.Bool(true), Min: 0, Max: float32(round6(maxv)),
		Right: "10px", Top: "middle", InRange: &opts.VisualMapInRange{Color: heatColors}}
}

// tokenAxisLabel labels every token up to 40 of them (echarts would drop
// every other one), turned when there are more than 8.
func tokenAxisLabel(n int) *opts.AxisLabel {
	l := &opts.AxisLabel{Show: opts.Bool(true), Interval: "auto", FontSize: 11}
	if n <= 40 {
		l.Interval = "0"
	}
	if n > 8 {
		l.Rotate = 45
	}
	return l
}

func rowAxisLabel(n int) *opts.AxisLabel {
	l := &opts.AxisLabel{Show: opts.Bool(true), Interval: "auto", FontSize: 11}
	if n <= 40 {
		l.Interval = "0"
	}
	return l
}

// AttentionHeatmap draws one head's attention weights: weights[i][j] is the
// weight of key j in query i's output (rows sum to 1; see AttentionWeights).
// queries and keys label the axes (token strings; nil numbers them), and
// the axes are category axes so repeated tokens stay apart. Query 0 is at the
// top, as in the matrix. Cells show their value when there are at most 144.
func AttentionHeatmap(weights [][]float64, queries, keys []string, title string) (*charts.HeatMap, error) {
	const fn = "AttentionHeatmap"
	rows, cols, maxv, err := checkMatrix(fn, "weights", weights)
	if err != nil {
		return nil, err
	}
	ql, err := axisLabels(fn, "queries", queries, rows)
	if err != nil {
		return nil, err
	}
	kl, err := axisLabels(fn, "keys", keys, cols)
	if err != nil {
		return nil, err
	}
	if title == "" {
		title = "Attention weights"
	}
	h := charts.NewHeatMap()
	sub := fmt.Sprintf("rows: %d queries, columns: %d keys", rows, cols)
	if rowsSumToOne(weights) { // a softmax's: not so for rows that see no key, or other matrices
		sub += "; each row sums to 1"
	}
	h.SetGlobalOptions(baseOpts("heatmap", title, sub, 0)...)
	h.SetGlobalOptions(
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
		charts.WithTooltipOpts(heatTooltip(ql, kl, nil)),
		charts.WithGridOpts(opts.Grid{Left: "20px", Right: "110px", Top: "70px", Bottom: "15px", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: kl,
			AxisLabel: tokenAxisLabel(cols), SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Data: ql, Inverse: opts.Bool(true),
			AxisLabel: rowAxisLabel(rows), SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
		charts.WithVisualMapOpts(heatVisualMap(maxv)),
	)
	h.AddSeries("weights", heatData(weights), charts.WithLabelOpts(opts.Label{
		Show: opts.Bool(rows*cols <= maxLabelledCells), FontSize: 10,
		Formatter: js("function (p) { return p.value[2] < 0.005 ? '' : p.value[2].toFixed(2); }")}))
	return h, nil
}

// AttentionHeads draws several heads' weights (heads[h][i][j], as for
// AttentionHeatmap) as a grid of heatmaps with cols panels per row (0: about
// square) and one colour scale.
func AttentionHeads(heads [][][]float64, queries, keys []string, cols int, title string) (*charts.HeatMap, error) {
	const fn = "AttentionHeads"
	if len(heads) == 0 {
		return nil, &InputError{Func: fn, Arg: "heads", Reason: "is empty"}
	}
	var rows, ncols int
	var maxv float64
	for h, w := range heads {
		r, c, m, err := checkMatrix(fn, fmt.Sprintf("heads[%d]", h), w)
		if err != nil {
			return nil, err
		}
		if h > 0 && (r != rows || c != ncols) {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("heads[%d]", h), Reason: fmt.Sprintf("is %dx%d, heads[0] is %dx%d", r, c, rows, ncols)}
		}
		rows, ncols, maxv = r, c, math.Max(maxv, m)
	}
	if err := checkCells(fn, "heads", len(heads)*rows*ncols); err != nil {
		return nil, err
	}
	ql, err := axisLabels(fn, "queries", queries, rows)
	if err != nil {
		return nil, err
	}
	kl, err := axisLabels(fn, "keys", keys, ncols)
	if err != nil {
		return nil, err
	}
	if cols <= 0 {
		cols = int(math.Ceil(math.Sqrt(float64(len(heads)))))
	}
	cols = min(cols, len(heads))
	prow := (len(heads) + cols - 1) / cols
	if title == "" {
		title = "Attention weights per head"
	}
	const top, panelH, gapY, left, right = 95, 260, 50, 1.5, 10.0 // px, px, px, %, %
	height := top + (prow-1)*(panelH+gapY) + panelH + 40
	names := make([]string, len(heads))
	c := charts.NewHeatMap()
	c.SetGlobalOptions(baseOpts("heads", title, fmt.Sprintf("%d heads; rows: %d queries, columns: %d keys; one colour scale", len(heads), rows, ncols), height)...)
	c.SetGlobalOptions(charts.WithVisualMapOpts(heatVisualMap(maxv)), charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}))
	pw := (100 - left - right) / float64(cols)
	for h, w := range heads {
		names[h] = "head " + strconv.Itoa(h)
		r, col := h/cols, h%cols
		c.GridList = append(c.GridList, opts.Grid{
			Left: fmt.Sprintf("%.2f%%", left+float64(col)*pw), Width: fmt.Sprintf("%.2f%%", pw-2),
			Top: fmt.Sprintf("%dpx", top+r*(panelH+gapY)), Height: fmt.Sprintf("%dpx", panelH-30), ContainLabel: opts.Bool(true)})
		xa := opts.XAxis{Type: "category", Data: kl, GridIndex: h, AxisLabel: tokenAxisLabel(ncols), SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}
		ya := opts.YAxis{Type: "category", Data: ql, GridIndex: h, Inverse: opts.Bool(true), Name: names[h], NameLocation: "start",
			AxisLabel: rowAxisLabel(rows), SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}
		if h == 0 {
			c.SetGlobalOptions(charts.WithXAxisOpts(xa), charts.WithYAxisOpts(ya))
		} else {
			c.ExtendXAxis(xa)
			c.ExtendYAxis(ya)
		}
		c.AddSeries(names[h], heatData(w), charts.WithHeatMapChartOpts(opts.HeatMapChart{XAxisIndex: h, YAxisIndex: h}))
	}
	c.SetGlobalOptions(charts.WithTooltipOpts(heatTooltip(ql, kl, names)))
	return c, nil
}

// Scores returns the scaled scores scale*q_i.k_j of one (batch b, query head
// h) as an Nq x Nk matrix, computed in float64 the way flashattn defines
// attention: query head h reads key head h / (Hq/Hkv), and with o.Causal key
// j is masked (-Inf) for row i unless j <= i + Nk - Nq. A nil o means not
// causal, scale 1/sqrt(D). It is an independent reference for the charts,
// O(Nq*Nk) in time and memory.
func Scores(q, k *flashattn.Tensor, b, h int, o *flashattn.Options) ([][]float64, error) {
	const fn = "Scores"
	d, err := flashattn.DimsOf(q, k, k)
	if err != nil {
		return nil, err
	}
	if b < 0 || b >= d.B {
		return nil, &InputError{Func: fn, Arg: "b", Reason: fmt.Sprintf("is %d, want 0 <= b < %d", b, d.B)}
	}
	if h < 0 || h >= d.Hq {
		return nil, &InputError{Func: fn, Arg: "h", Reason: fmt.Sprintf("is %d, want 0 <= h < %d", h, d.Hq)}
	}
	scale, causal := 1/math.Sqrt(float64(d.D)), false
	if o != nil {
		causal = o.Causal
		if o.Scale != 0 {
			scale = o.Scale
		}
	}
	if !finite(scale) {
		return nil, &InputError{Func: fn, Arg: "Options.Scale", Reason: fmt.Sprintf("is %v", scale)}
	}
	kh := d.KVHead(h)
	s := make([][]float64, d.Nq)
	for i := range s {
		s[i] = make([]float64, d.Nk)
		for j := range s[i] {
			if causal && j > i+d.CausalOffset() {
				s[i][j] = math.Inf(-1)
				continue
			}
			var dot float64
			for x := 0; x < d.D; x++ {
				dot += float64(q.At(b, i, h, x)) * float64(k.At(b, j, kh, x))
			}
			s[i][j] = scale * dot
		}
	}
	return s, nil
}

// AttentionWeights returns softmax(Scores(q, k, b, h, o)) row by row: the
// Nq x Nk weights of one head, masked entries 0, a row that sees no key all 0.
func AttentionWeights(q, k *flashattn.Tensor, b, h int, o *flashattn.Options) ([][]float64, error) {
	s, err := Scores(q, k, b, h, o)
	if err != nil {
		return nil, err
	}
	for _, row := range s {
		st := RowStatsOf(row)
		for j, x := range row {
			if math.IsInf(st.Max, -1) {
				row[j] = 0
			} else {
				row[j] = math.Exp(x-st.Max) / st.Sum
			}
		}
	}
	return s, nil
}
