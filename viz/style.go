package viz

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/types"
)

// Every chart starts 900x500 px, white, without animation (so screenshots and
// HTML are whole and reproducible), with a fixed ID (reassigned on render) and
// a save-as-image button. Change any of it with SetGlobalOptions.
func baseOpts(kind, title, subtitle string, height int) []charts.GlobalOpts {
	if height <= 0 {
		height = 500
	}
	return []charts.GlobalOpts{
		charts.WithInitializationOpts(opts.Initialization{
			Width:   "900px",
			Height:  fmt.Sprintf("%dpx", height),
			ChartID: "goflash_" + kind,
			Theme:   "white",
		}),
		charts.WithAnimation(false),
		charts.WithTitleOpts(opts.Title{Title: clean(title), Subtitle: clean(subtitle), Left: "center",
			TitleStyle: &opts.TextStyle{FontSize: 18, LineHeight: 24}, SubtitleStyle: &opts.TextStyle{FontSize: 12, LineHeight: 16}}),
		charts.WithToolboxOpts(opts.Toolbox{Show: opts.Bool(true), Right: "20px",
			Feature: &opts.ToolBoxFeature{SaveAsImage: &opts.ToolBoxFeatureSaveAsImage{Show: opts.Bool(true), Title: "save PNG"}}}),
	}
}

// clean keeps user text from colliding with go-echarts' marker for inline
// JavaScript functions ("__f__"), which it strips from the whole output.
func clean(s string) string { return strings.ReplaceAll(s, "__f__", "__f\u200b__") }

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clean(s)
	}
	return out
}

// js wraps JavaScript source (one line, no // comments: go-echarts strips
// newlines) as an option value.
func js(src string) types.FuncStr { return opts.FuncOpts(src) }

// jsValue returns a JavaScript expression for v (plain data: strings,
// numbers, slices). go-echarts puts function sources inside a JSON string and
// escapes their quotes and backslashes, so the expression has neither: it
// decodes percent-encoded JSON.
func jsValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only slices of strings and finite numbers are passed here.
		return "null"
	}
	var e strings.Builder
	for _, c := range b {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			e.WriteByte(c)
		} else {
			fmt.Fprintf(&e, "%%%02X", c)
		}
	}
	return "JSON.parse(decodeURIComponent('" + e.String() + "'))"
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Colours: Okabe-Ito, distinguishable with the common colour-vision
// deficiencies.
const (
	colBlue   = "#0072B2"
	colOrange = "#E69F00"
	colGreen  = "#009E73"
	colRed    = "#D55E00"
	colPurple = "#CC79A7"
	colSky    = "#56B4E9"
	colYellow = "#F0E442"
	colGrey   = "#8c8c8c"
	colBlack  = "#000000"
)

// look is how one series is drawn.
type look struct {
	color  string
	symbol string  // "circle", "diamond", "none", ...
	size   int     // symbol size, px
	line   string  // "solid", "dashed", "dotted"; "" draws no line
	width  float32 // line width, px (0: 2)
	x, y   int     // axis indexes
}

func (l look) opt() charts.SeriesOpts {
	return func(s *charts.SingleSeries) {
		s.XAxisIndex, s.YAxisIndex = l.x, l.y
		s.Color = l.color
		s.ItemStyle = &opts.ItemStyle{Color: l.color}
		if l.symbol != "" {
			s.Symbol = l.symbol
			s.SymbolSize = l.size
		}
		w := l.width
		if w == 0 {
			w = 2
		}
		if l.line == "" {
			s.LineStyle = &opts.LineStyle{Width: 0, Opacity: opts.Float(0)}
		} else {
			s.LineStyle = &opts.LineStyle{Color: l.color, Type: l.line, Width: w}
		}
	}
}
