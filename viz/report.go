package viz

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"strconv"
	"strings"
)

// Report is one self-contained HTML page of headings, paragraphs, tables and
// charts. The echarts library is inlined once, in the page's head; nothing is
// fetched from the network. Chart IDs are reassigned in page order, so the
// same report renders to the same bytes.
//
// The Add methods return the report for chaining; problems with their
// arguments are reported by HTML, WriteTo and WriteFile.
type Report struct {
	Title  string
	blocks []block
	err    error
}

type blockKind int

const (
	blockHeading blockKind = iota
	blockText
	blockTable
	blockChart
)

type block struct {
	kind   blockKind
	text   string
	header []string
	rows   [][]string
	chart  Chart
}

// NewReport returns an empty report; title is the page title and first heading.
func NewReport(title string) *Report { return &Report{Title: title} }

// Page returns a report holding just the given charts.
func Page(title string, charts ...Chart) *Report {
	r := NewReport(title)
	for _, c := range charts {
		r.AddChart(c)
	}
	return r
}

// AddHeading adds a section heading.
func (r *Report) AddHeading(text string) *Report {
	r.blocks = append(r.blocks, block{kind: blockHeading, text: text})
	return r
}

// AddText adds a paragraph of plain text (HTML-escaped; blank lines start new
// paragraphs).
func (r *Report) AddText(text string) *Report {
	r.blocks = append(r.blocks, block{kind: blockText, text: text})
	return r
}

// AddTable adds a table. Every row must have len(header) cells; cells that
// parse as numbers are right-aligned.
func (r *Report) AddTable(header []string, rows [][]string) *Report {
	for i, row := range rows {
		if len(row) != len(header) && r.err == nil {
			r.err = &InputError{Func: "Report.AddTable", Arg: fmt.Sprintf("rows[%d]", i),
				Reason: fmt.Sprintf("has %d cells, header has %d", len(row), len(header))}
		}
	}
	r.blocks = append(r.blocks, block{kind: blockTable, header: header, rows: rows})
	return r
}

// AddChart adds a chart.
func (r *Report) AddChart(c Chart) *Report {
	if c == nil && r.err == nil {
		r.err = &InputError{Func: "Report.AddChart", Arg: "chart", Reason: "is nil"}
	}
	r.blocks = append(r.blocks, block{kind: blockChart, chart: c})
	return r
}

// Charts is the number of charts in the report.
func (r *Report) Charts() int {
	n := 0
	for _, b := range r.blocks {
		if b.kind == blockChart {
			n++
		}
	}
	return n
}

const reportCSS = `.goflash-report{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;max-width:960px;margin:0 auto;padding:0 12px 24px}
.goflash-report h1{font-size:1.6em;margin:.8em 0 .4em}
.goflash-report h2{font-size:1.25em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.goflash-report p{line-height:1.5;margin:.5em 0}
.goflash-report table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
.goflash-report th,.goflash-report td{border:1px solid #d0d7de;padding:4px 8px;text-align:left}
.goflash-report th{background:#f6f8fa}
.goflash-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.goflash-chart{margin:12px 0}
`

// Fragment renders the report's body (no <html> or <head>, no library) for
// a page that already includes LibraryScript, such as a notebook output.
// Chart IDs become prefix + "c1", "c2", ...; prefix must be a JavaScript
// identifier.
func (r *Report) Fragment(prefix string) (string, error) {
	if r.err != nil {
		return "", r.err
	}
	var b strings.Builder
	b.WriteString("<style>" + reportCSS + "</style>\n<div class=\"goflash-report\">\n")
	if r.Title != "" {
		fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(r.Title))
	}
	n := 0
	for _, bl := range r.blocks {
		switch bl.kind {
		case blockHeading:
			fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(bl.text))
		case blockText:
			for _, p := range strings.Split(strings.TrimSpace(bl.text), "\n\n") {
				if p = strings.TrimSpace(p); p != "" {
					fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(p))
				}
			}
		case blockTable:
			writeTable(&b, bl.header, bl.rows)
		case blockChart:
			n++
			s, err := renderChart(bl.chart, prefix+"c"+strconv.Itoa(n))
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
	}
	b.WriteString("</div>\n")
	return b.String(), nil
}

func writeTable(b *strings.Builder, header []string, rows [][]string) {
	b.WriteString("<table>\n<thead><tr>")
	for _, h := range header {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range rows {
		b.WriteString("<tr>")
		for _, c := range row {
			if isNumber(c) {
				fmt.Fprintf(b, "<td class=\"num\">%s</td>", html.EscapeString(c))
			} else {
				fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

// isNumber reports whether a table cell reads as a number, units aside
// ("12.5", "3.1x", "45 %").
func isNumber(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, " x%×")
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// HTML renders the whole page.
func (r *Report) HTML() ([]byte, error) {
	body, err := r.Fragment("goflash_")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(r.Title))
	b.WriteString("<meta name=\"generator\" content=\"goflash viz, Apache ECharts " + EChartsVersion + " inlined\">\n")
	b.WriteString(LibraryScript())
	b.WriteString("</head>\n<body>\n")
	b.WriteString(body)
	b.WriteString("</body>\n</html>\n")
	return b.Bytes(), nil
}

// WriteTo writes the whole page to w.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	p, err := r.HTML()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(p)
	return int64(n), err
}

// WriteFile writes the whole page to path.
func (r *Report) WriteFile(path string) error {
	p, err := r.HTML()
	if err != nil {
		return err
	}
	return os.WriteFile(path, p, 0o644)
}
