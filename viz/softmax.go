package viz

import (
	"fmt"
	"math"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/flashattn"
)

// RowStats are the exact softmax statistics of one row of scaled scores:
// Max = max_j s_j and Sum = sum_j exp(s_j - Max), so LSE = Max + log(Sum).
// These are the final m and l that the online softmax must reach.
type RowStats struct {
	Max, Sum float64
}

// RowStatsOf computes RowStats in float64 with two passes. -Inf scores
// (masked keys) count for nothing; a row of only -Inf has Max -Inf, Sum 0.
func RowStatsOf(scores []float64) RowStats {
	st := RowStats{Max: math.Inf(-1)}
	for _, s := range scores {
		st.Max = math.Max(st.Max, s)
	}
	if math.IsInf(st.Max, -1) {
		return st
	}
	for _, s := range scores {
		st.Sum += math.Exp(s - st.Max)
	}
	return st
}

// TracedRow returns the scaled scores of the row a trace followed
// (tr.Batch, tr.Head, tr.Row), from the same q and k and options that were
// passed to Forward; see Scores.
func TracedRow(q, k *flashattn.Tensor, tr *flashattn.Trace, o *flashattn.Options) ([]float64, error) {
	if tr == nil {
		return nil, &InputError{Func: "TracedRow", Arg: "trace", Reason: "is nil"}
	}
	s, err := Scores(q, k, tr.Batch, tr.Head, o) // checks q and k first
	if err != nil {
		return nil, err
	}
	if tr.Row < 0 || tr.Row >= len(s) {
		return nil, &InputError{Func: "TracedRow", Arg: "trace.Row", Reason: fmt.Sprintf("is %d, q has %d rows", tr.Row, len(s))}
	}
	return s[tr.Row], nil
}

// SoftmaxReference is what OnlineSoftmax compares a trace against. With
// Scores (the traced row's scaled scores, masked keys -Inf, as TracedRow
// returns), the exact max and sum of every prefix of K blocks are drawn
// too, and the final ones come from it; without, Exact gives the final ones.
type SoftmaxReference struct {
	Scores []float64
	Exact  RowStats
}

// OnlineSoftmax draws the running state of FlashAttention's online softmax
// for the traced row, one point per K block in the order they were
// processed: above, the running max m_j and the rescale factor
// exp(m_(j-1) - m_j) applied to the accumulator (right axis); below, the
// running sum l_j (relative to m_j). Dashed lines are the exact row max and
// sum; with ref.Scores, diamonds mark the exact max and sum of the keys seen
// so far, which m_j and l_j must equal at every step.
func OnlineSoftmax(tr *flashattn.Trace, ref SoftmaxReference) (*charts.Line, error) {
	const fn = "OnlineSoftmax"
	if tr == nil {
		return nil, &InputError{Func: fn, Arg: "trace", Reason: "is nil"}
	}
	if len(tr.RowSteps) == 0 {
		return nil, &InputError{Func: fn, Arg: "trace", Reason: "has no row steps: it was not filled by a CPUFlash Forward call (Options.Trace), or its row sees no key"}
	}
	exact := ref.Exact
	if ref.Scores != nil {
		exact = RowStatsOf(ref.Scores)
	}
	if !finite(exact.Max) || !finite(exact.Sum) || exact.Sum <= 0 {
		return nil, &InputError{Func: fn, Arg: "ref", Reason: fmt.Sprintf("has max %v, sum %v (want finite, sum > 0)", exact.Max, exact.Sum)}
	}
	n := len(tr.RowSteps)
	blocks := make([]string, n)
	m := make([]opts.LineData, n)
	l := make([]opts.LineData, n)
	resc := make([]opts.LineData, n)
	var pm, pl []opts.LineData
	for i, s := range tr.RowSteps {
		if !finite(s.L) || math.IsNaN(s.M) || math.IsNaN(s.Rescale) || math.IsInf(s.Rescale, 0) {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("trace.RowSteps[%d]", i), Reason: fmt.Sprintf("has m %v, l %v, rescale %v", s.M, s.L, s.Rescale)}
		}
		blocks[i] = "K block " + strconv.Itoa(s.KBlock)
		m[i] = lineValue(s.M)
		l[i] = opts.LineData{Value: s.L}
		resc[i] = opts.LineData{Value: s.Rescale}
		if ref.Scores != nil && tr.Bc > 0 {
			end := min((s.KBlock+1)*tr.Bc, len(ref.Scores))
			p := RowStatsOf(ref.Scores[:max(end, 0)])
			pm = append(pm, lineValue(p.Max))
			pl = append(pl, opts.LineData{Value: p.Sum})
		}
	}
	subtitle := fmt.Sprintf("row %d of head %d, batch %d; Bc = %d; final m = %.6g (exact %.6g), l = %.6g (exact %.6g)",
		tr.Row, tr.Head, tr.Batch, tr.Bc, tr.M, exact.Max, tr.L, exact.Sum)
	c := charts.NewLine()
	c.SetGlobalOptions(baseOpts("softmax", "Online softmax of one row", subtitle, 0)...)
	c.SetGlobalOptions(
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis",
			ValueFormatter: js("function (v) { return (v === null || v === undefined || v === '-') ? '-' : Number(v).toPrecision(6); }")}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "58px", Left: "center", Width: "820px"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: blocks, GridIndex: 0, AxisLabel: &opts.AxisLabel{Show: opts.Bool(false)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "max m", GridIndex: 0, Scale: opts.Bool(true)}),
	)
	c.GridList = []opts.Grid{
		{Left: "70px", Right: "70px", Top: "128px", Height: "112px"},
		{Left: "70px", Right: "70px", Top: "282px", Height: "160px"},
	}
	c.ExtendYAxis(
		opts.YAxis{Type: "value", Name: "rescale", GridIndex: 0, Min: 0, Max: 1, Position: "right"},
		opts.YAxis{Type: "value", Name: "sum l", GridIndex: 1, Scale: opts.Bool(true)},
	)
	c.ExtendXAxis(opts.XAxis{Type: "category", Data: blocks, GridIndex: 1, Name: "K blocks in processing order", NameLocation: "middle", NameGap: 28})
	flat := func(v float64) []opts.LineData {
		d := make([]opts.LineData, n)
		for i := range d {
			d[i] = opts.LineData{Value: v}
		}
		return d
	}
	c.AddSeries("running max m", m, look{color: colBlue, symbol: "circle", size: 7, line: "solid"}.opt())
	c.AddSeries("exact row max", flat(exact.Max), look{color: colBlack, symbol: "none", line: "dashed", width: 1.5}.opt())
	if pm != nil {
		c.AddSeries("exact max of keys so far", pm, look{color: colOrange, symbol: "diamond", size: 13}.opt())
	}
	c.AddSeries("rescale exp(m_old - m_new), right axis", resc, look{color: colGreen, symbol: "triangle", size: 8, line: "dotted", width: 1.5, y: 1}.opt())
	c.AddSeries("running sum l", l, look{color: colRed, symbol: "circle", size: 7, line: "solid", x: 1, y: 2}.opt())
	c.AddSeries("exact row sum", flat(exact.Sum), look{color: colBlack, symbol: "none", line: "dashed", width: 1.5, x: 1, y: 2}.opt())
	if pl != nil {
		c.AddSeries("exact sum of keys so far", pl, look{color: colPurple, symbol: "diamond", size: 13, x: 1, y: 2}.opt())
	}
	return c, nil
}

// lineValue is a point, or a gap for -Inf (no visible key yet).
func lineValue(x float64) opts.LineData {
	if math.IsInf(x, -1) {
		return opts.LineData{Value: "-"}
	}
	return opts.LineData{Value: x}
}
