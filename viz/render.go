package viz

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/render"
)

// Chart is any go-echarts chart (*charts.Line, *charts.HeatMap, ...): the
// charts of this package and charts users build themselves render alike.
type Chart interface {
	RenderSnippet() render.ChartSnippet
}

var (
	elementID    = regexp.MustCompile(`\bid="([^"]+)"`)
	elementStyle = regexp.MustCompile(`\bstyle="([^"]*)"`)
	scriptBody   = regexp.MustCompile(`(?s)^\s*<script[^>]*>(.*)</script>\s*$`)
	validID      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	scriptClose  = regexp.MustCompile(`(?i)</script`)
)

// renderChart renders c as a container element and a script that draws it,
// with its chart ID replaced by id. IDs are assigned by the caller (in page
// order) so that output is reproducible and unique on the page; the go-echarts
// script runs inside a function so that two outputs on one notebook page
// never clash over its top-level let declarations.
func renderChart(c Chart, id string) (out string, err error) {
	if c == nil {
		return "", &InputError{Func: "render", Arg: "chart", Reason: "is nil"}
	}
	if !validID.MatchString(id) {
		return "", &InputError{Func: "render", Arg: "id", Reason: fmt.Sprintf("%q is not a JavaScript identifier", id)}
	}
	defer func() {
		// go-echarts panics on template errors; a library call must not.
		if r := recover(); r != nil {
			err = fmt.Errorf("viz: go-echarts could not render the chart: %v", r)
		}
	}()
	s := c.RenderSnippet()
	m := elementID.FindStringSubmatch(s.Element)
	if m == nil {
		return "", fmt.Errorf("viz: go-echarts chart element has no id: %q", s.Element)
	}
	old := html.UnescapeString(m[1])
	style := "width:900px;height:500px;"
	if sm := elementStyle.FindStringSubmatch(s.Element); sm != nil {
		style = html.UnescapeString(sm[1])
	}
	if strings.TrimSpace(s.Option) == "" {
		// json.Marshal failed inside go-echarts (NaN or Inf in the data).
		return "", fmt.Errorf("viz: chart %q has options that cannot be encoded (NaN or Inf in its data?)", old)
	}
	bm := scriptBody.FindStringSubmatch(s.Script)
	if bm == nil {
		return "", fmt.Errorf("viz: unexpected go-echarts script for chart %q", old)
	}
	body := bm[1]
	if !strings.Contains(body, "getElementById('"+old+"')") {
		return "", fmt.Errorf("viz: unexpected go-echarts script for chart %q (template changed?)", old)
	}
	// The go-echarts script template names the chart in exactly these forms.
	for _, p := range [][2]string{
		{"getElementById('" + old + "')", "getElementById('" + id + "')"},
		{"goecharts_" + old, "goecharts_" + id},
		{"option_" + old, "option_" + id},
	} {
		body = strings.ReplaceAll(body, p[0], p[1])
	}
	// User text (token labels, titles) sits in the options verbatim: keep it
	// from ending the script element. Both rewrites mean the same in JS.
	body = scriptClose.ReplaceAllString(body, `<\/script`)
	body = strings.ReplaceAll(body, "<!--", `<\!--`)

	var b strings.Builder
	fmt.Fprintf(&b, "<div class=\"goflash-chart\"><div id=\"%s\" style=\"%s;max-width:100%%\"></div></div>\n", id, html.EscapeString(strings.TrimSuffix(style, ";")))
	b.WriteString("<script>\n(function () {\n")
	fmt.Fprintf(&b, "var el = document.getElementById('%s');\n", id)
	b.WriteString("if (!el) { return; }\n")
	b.WriteString("if (typeof echarts === 'undefined') { el.textContent = " +
		strconv.Quote("echarts is not loaded on this page: the first chart output of this session (which carries the library) is gone. "+
			"Display again with GOFLASH_VIZ_INLINE=always, or render a whole page with viz.Report.") + "; return; }\n")
	b.WriteString("try {\n")
	b.WriteString(strings.TrimSpace(body))
	b.WriteString("\n} catch (e) { el.textContent = 'chart failed: ' + e; throw e; }\n})();\n</script>\n")
	return b.String(), nil
}

// Fragment renders charts as HTML elements and scripts for a page that
// already includes LibraryScript (a notebook output after the first, say).
// Chart IDs become prefix + "c1", "c2", ... in order; prefix must be a
// JavaScript identifier and unique on the page.
func Fragment(prefix string, charts ...Chart) (string, error) {
	var b strings.Builder
	for i, c := range charts {
		s, err := renderChart(c, prefix+"c"+strconv.Itoa(i+1))
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
