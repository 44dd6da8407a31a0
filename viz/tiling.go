package viz

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/flashattn"
)

// stepLooks colour the three kinds of step: computed tiles blue, tiles cut
// by the causal diagonal orange, skipped tiles light grey.
var stepLooks = [...]struct {
	kind  flashattn.StepKind
	name  string
	color string
}{
	{flashattn.StepComputed, "computed", colBlue},
	{flashattn.StepMasked, "masked (on the diagonal)", colOrange},
	{flashattn.StepSkipped, "skipped (above the diagonal)", "#dcdcdc"},
}

// maxLabelledSteps is the largest grid whose cells carry their order number.
const maxLabelledSteps = 400

// Tiling draws the Tr x Tc grid of (Q block i, K block j) steps of a traced
// CPUFlash forward pass: each cell coloured computed, masked (cut by the
// causal diagonal, computed with an element mask) or skipped (never loaded),
// and numbered with its place in the work of its Q block (1, 2, ...). Q blocks
// (rows) run in parallel; inside one, K blocks run left to right.
func Tiling(tr *flashattn.Trace) (*charts.HeatMap, error) {
	const fn = "Tiling"
	if tr == nil {
		return nil, &InputError{Func: fn, Arg: "trace", Reason: "is nil"}
	}
	if tr.Tr <= 0 || tr.Tc <= 0 || len(tr.Steps) == 0 {
		return nil, &InputError{Func: fn, Arg: "trace", Reason: "has no steps: pass it in Options.Trace to a CPUFlash Forward call"}
	}
	if err := checkCells(fn, "trace", tr.Tr*tr.Tc); err != nil {
		return nil, err
	}
	// Sorted here too: the output must not depend on the order in which
	// parallel Q blocks recorded their steps.
	steps := slices.Clone(tr.Steps)
	slices.SortStableFunc(steps, func(a, b flashattn.TraceStep) int {
		return cmp.Or(cmp.Compare(a.QBlock, b.QBlock), cmp.Compare(a.KBlock, b.KBlock))
	})
	series := make([][]opts.HeatMapData, len(stepLooks))
	seen := make(map[[2]int]bool, len(steps))
	counts := make([]int, len(stepLooks))
	for n, s := range steps {
		if s.QBlock < 0 || s.QBlock >= tr.Tr || s.KBlock < 0 || s.KBlock >= tr.Tc {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("trace.Steps[%d]", n), Reason: fmt.Sprintf("is block (%d, %d) outside the %d x %d grid", s.QBlock, s.KBlock, tr.Tr, tr.Tc)}
		}
		if seen[[2]int{s.QBlock, s.KBlock}] {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("trace.Steps[%d]", n), Reason: fmt.Sprintf("repeats block (%d, %d)", s.QBlock, s.KBlock)}
		}
		seen[[2]int{s.QBlock, s.KBlock}] = true
		k := -1
		for i, l := range stepLooks {
			if l.kind == s.Kind {
				k = i
			}
		}
		if k < 0 {
			return nil, &InputError{Func: fn, Arg: fmt.Sprintf("trace.Steps[%d]", n), Reason: fmt.Sprintf("has unknown kind %d", int(s.Kind))}
		}
		counts[k]++
		// [x = K block, y = Q block, order (1-based; 0 when skipped)]
		series[k] = append(series[k], opts.HeatMapData{Value: [3]int{s.KBlock, s.QBlock, s.Order + 1}})
	}
	qb := make([]string, tr.Tr)
	for i := range qb {
		qb[i] = "Q" + strconv.Itoa(i)
	}
	kb := make([]string, tr.Tc)
	for j := range kb {
		kb[j] = "K" + strconv.Itoa(j)
	}
	subtitle := fmt.Sprintf("rows: Q blocks of Br = %d queries (run in parallel); columns: K blocks of Bc = %d keys (run left to right)\n"+
		"%d x %d steps: %d computed, %d masked, %d skipped; number = order of the step in its Q block",
		tr.Br, tr.Bc, tr.Tr, tr.Tc, counts[0], counts[1], counts[2])
	c := charts.NewHeatMap()
	c.SetGlobalOptions(baseOpts("tiling", "FlashAttention-2 tiling schedule", subtitle, 0)...)
	c.SetGlobalOptions(
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "8px"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Formatter: js(
			"function (p) { var v = p.value; return 'Q block ' + v[1] + ' &times; K block ' + v[0] + '<br/>' + p.seriesName + (v[2] > 0 ? '<br/>step ' + v[2] + ' of its Q block' : ''); }")}),
		charts.WithGridOpts(opts.Grid{Left: "20px", Right: "30px", Top: "85px", Bottom: "40px", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: kb,
			AxisLabel: &opts.AxisLabel{Show: opts.Bool(true), Interval: "auto"}, SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Data: qb,
			Inverse: opts.Bool(true), AxisLabel: &opts.AxisLabel{Show: opts.Bool(true), Interval: "auto"}, SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
	)
	label := charts.WithLabelOpts(opts.Label{Show: opts.Bool(tr.Tr*tr.Tc <= maxLabelledSteps), Color: "#ffffff", FontWeight: "bold",
		Formatter: js("function (p) { return p.value[2] > 0 ? String(p.value[2]) : ''; }")})
	for k, l := range stepLooks {
		c.AddSeries(l.name, series[k], label, func(s *charts.SingleSeries) {
			s.Color = l.color
			s.ItemStyle = &opts.ItemStyle{Color: l.color, BorderColor: "#ffffff", BorderWidth: 2}
		})
	}
	return c, nil
}
