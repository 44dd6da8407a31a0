// Command figures makes the tutorial's figures. Most are the charts the
// notebooks draw, so that a figure is always exactly what the notebook shows:
// it reads executed notebooks (notebooks/run.sh writes them to
// .build/notebooks), puts each chosen chart output on a page of its own with
// the echarts library, checks in headless Chromium that the chart is drawn,
// and takes a screenshot. The rest it draws itself: chapter 6's roofline of
// the T4 (viz.Roofline, screenshotted the same way) and its diagrams of the
// hardware and the kernels' data layouts (SVG, computed from the kernels'
// own formulas, diagrams.go).
//
//	notebooks/run.sh && go run ./tutorial/figures
//	go run ./tutorial/figures -only 06-roofline-t4,06-swizzle   # some figures; no notebooks needed for these
//	go run ./tutorial/figures -check   # every image the chapters show exists, every figure is shown, the SVGs are current
//	go run ./tutorial/figures -roofline results/bench.json   # your goflash bench run on your GPU's roofline (chapter 7)
//
// Flags: -in (executed notebooks), -out (where the figures go), -chromium,
// -only, -check; -roofline FILE with -peak-tflops, -peak-gbps and -report.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/goflash/goflash/viz"
)

// figures names the chart outputs the tutorial shows: the n-th chart output
// (1-based, in cell order) of a notebook. relabel lists old, new pairs of
// strings replaced in the chart's options before the screenshot, for labels
// the notebook's chart function fixes (viz.AttentionHeads names its panels
// "head 0", "head 1", ..., where chapter 1's panels are three variants of
// one head).
var figures = []struct {
	notebook string
	chart    int
	name     string
	relabel  []string
}{
	{"01_qkv", 1, "01-qkv-scores", nil},
	{"01_qkv", 2, "01-qkv-symmetry", []string{
		`"head 0"`, `"W_Q, W_K separate"`, `"head 1"`, `"no projections"`, `"head 2"`, `"W_K = W_Q (tied)"`,
		`"3 heads; rows`, `"3 variants of one head; rows`}},
	{"02_naive_memory", 1, "02-memory", nil},
	{"03_online_softmax", 1, "03-online-softmax", nil},
	{"04_tiling_forward", 1, "04-tiling", nil},
	{"05_backward", 1, "05-recomputed-p", nil},
	{"07_benchmarks", 1, "07-cpu-bench", nil},
	{"07_benchmarks", 2, "07-cpu-memory", nil},
}

// drawn are the charts this program draws itself with viz (PNG, through
// Chromium like the notebook charts).
var drawn = []struct {
	name string
	draw func() (viz.Chart, error)
}{
	{"06-roofline-t4", func() (viz.Chart, error) { return t4Roofline() }},
}

func main() {
	in := flag.String("in", ".build/notebooks", "directory of executed notebooks (notebooks/run.sh)")
	out := flag.String("out", "tutorial/figures", "directory for the figures")
	chromium := flag.String("chromium", "", "Chromium binary (default: chromium or chromium-browser on PATH)")
	only := flag.String("only", "", "comma-separated figure names to make (default: all)")
	checkOnly := flag.Bool("check", false, "only check that the chapters' images exist, every figure is used and the SVG diagrams are current")
	roofline := flag.String("roofline", "", "a goflash bench.json: print its forward rows' share of the GPU's peak and draw them on its roofline")
	peakTF := flag.Float64("peak-tflops", 0, "with -roofline: the GPU's dense fp16 tensor-core peak, TFLOP/s (default: the data sheet of a T4, H100 SXM or H200)")
	peakBW := flag.Float64("peak-gbps", 0, "with -roofline: the GPU's memory bandwidth, GB/s")
	report := flag.String("report", "", "with -roofline: the HTML page to write (default: roofline.html beside the bench.json)")
	flag.Parse()
	if *roofline != "" {
		rep := *report
		if rep == "" {
			rep = filepath.Join(filepath.Dir(*roofline), "roofline.html")
		}
		if err := runRoofline(*roofline, viz.GPUPeak{TFLOPs: *peakTF, GBps: *peakBW}, rep, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "figures:", err)
			os.Exit(1)
		}
		return
	}
	if *checkOnly {
		if err := checkLinks(filepath.Dir(*out), *out); err != nil {
			fmt.Fprintln(os.Stderr, "figures:", err)
			os.Exit(1)
		}
		fmt.Println("figures: every image the chapters show exists, every figure is shown, and the diagrams are current")
		return
	}
	if err := run(*in, *out, *chromium, *only); err != nil {
		fmt.Fprintln(os.Stderr, "figures:", err)
		os.Exit(1)
	}
}

// selected reports whether figure name is among the comma-separated names
// of only (all when only is empty).
func selected(only, name string) bool {
	if only == "" {
		return true
	}
	for _, n := range strings.Split(only, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// allNames lists every figure's file name.
func allNames() []string {
	var out []string
	for _, f := range figures {
		out = append(out, f.name+".png")
	}
	for _, d := range drawn {
		out = append(out, d.name+".png")
	}
	for _, d := range diagrams {
		out = append(out, d.name+".svg")
	}
	return out
}

func run(in, out, chromium, only string) error {
	if only != "" {
		known := map[string]bool{}
		for _, n := range allNames() {
			known[strings.TrimSuffix(strings.TrimSuffix(n, ".png"), ".svg")] = true
		}
		for _, n := range strings.Split(only, ",") {
			if !known[strings.TrimSpace(n)] {
				return fmt.Errorf("-only: no figure %q", n)
			}
		}
	}
	for _, d := range diagrams {
		if !selected(only, d.name) {
			continue
		}
		p := filepath.Join(out, d.name+".svg")
		if err := os.WriteFile(p, []byte(d.draw()), 0o644); err != nil {
			return err
		}
		fmt.Println(p)
	}
	needBrowser := false
	for _, f := range figures {
		needBrowser = needBrowser || selected(only, f.name)
	}
	for _, d := range drawn {
		needBrowser = needBrowser || selected(only, d.name)
	}
	if !needBrowser {
		return nil
	}
	if chromium == "" {
		for _, c := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(c); err == nil {
				chromium = p
				break
			}
		}
		if chromium == "" {
			return errors.New("no Chromium on PATH (apt-get install chromium, or -chromium PATH)")
		}
	}
	tmp, err := os.MkdirTemp("", "goflash-figures-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	shot := func(name, output, from string) error {
		png := filepath.Join(out, name+".png")
		if err := screenshot(chromium, tmp, output, png); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st, err := os.Stat(png)
		if err != nil {
			return err
		}
		fmt.Printf("%s (%s, %d KB)\n", png, from, st.Size()/1024)
		return nil
	}
	for _, d := range drawn {
		if !selected(only, d.name) {
			continue
		}
		c, err := d.draw()
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		frag, err := viz.Fragment("fig", c)
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		if err := shot(d.name, frag, "drawn here"); err != nil {
			return err
		}
	}
	cache := map[string][]string{}
	for _, f := range figures {
		if !selected(only, f.name) {
			continue
		}
		charts, ok := cache[f.notebook]
		if !ok {
			charts, err = chartOutputs(filepath.Join(in, f.notebook+".ipynb"))
			if err != nil {
				return fmt.Errorf("%w (run notebooks/run.sh first)", err)
			}
			cache[f.notebook] = charts
		}
		if f.chart > len(charts) {
			return fmt.Errorf("%s shows %d charts, figure %s wants chart %d", f.notebook, len(charts), f.name, f.chart)
		}
		chart := charts[f.chart-1]
		for i := 0; i+1 < len(f.relabel); i += 2 {
			if !strings.Contains(chart, f.relabel[i]) {
				return fmt.Errorf("%s: the chart has no %s to relabel (did the notebook's chart change?)", f.name, f.relabel[i])
			}
			chart = strings.ReplaceAll(chart, f.relabel[i], f.relabel[i+1])
		}
		if err := shot(f.name, chart, fmt.Sprintf("%s chart %d", f.notebook, f.chart)); err != nil {
			return err
		}
	}
	return nil
}

var imageLink = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)

// checkLinks checks that every image a chapter in dir links to exists, that
// every figure is linked from some chapter, and that the committed SVG
// diagrams are what diagrams.go draws.
func checkLinks(dir, figDir string) error {
	mds, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil || len(mds) == 0 {
		return fmt.Errorf("no chapters in %s", dir)
	}
	used := map[string]bool{}
	var problems []string
	for _, md := range mds {
		b, err := os.ReadFile(md)
		if err != nil {
			return err
		}
		for _, m := range imageLink.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue // badges
			}
			p := filepath.Join(dir, m[1])
			used[filepath.Clean(p)] = true
			if _, err := os.Stat(p); err != nil {
				problems = append(problems, fmt.Sprintf("%s shows %s, which does not exist", md, m[1]))
			}
		}
	}
	for _, n := range allNames() {
		p := filepath.Clean(filepath.Join(figDir, n))
		if !used[p] {
			problems = append(problems, fmt.Sprintf("figure %s is not shown by any chapter", p))
		}
	}
	for _, d := range diagrams {
		p := filepath.Join(figDir, d.name+".svg")
		if b, err := os.ReadFile(p); err == nil && string(b) != d.draw() {
			problems = append(problems, fmt.Sprintf("%s is not what diagrams.go draws: go run ./tutorial/figures -only %s", p, d.name))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// chartOutputs returns the HTML of every chart output of an executed
// notebook, in cell order.
func chartOutputs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var nb struct {
		Cells []struct {
			CellType string `json:"cell_type"`
			Outputs  []struct {
				OutputType string                     `json:"output_type"`
				Data       map[string]json.RawMessage `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var charts []string
	for _, c := range nb.Cells {
		for _, o := range c.Outputs {
			raw, ok := o.Data["text/html"]
			if !ok || o.OutputType != "display_data" {
				continue
			}
			// nbformat stores text either as one string or as a list of lines.
			var s string
			if json.Unmarshal(raw, &s) != nil {
				var lines []string
				if err := json.Unmarshal(raw, &lines); err != nil {
					return nil, fmt.Errorf("%s: text/html output: %w", path, err)
				}
				s = strings.Join(lines, "")
			}
			if strings.Contains(s, `class="goflash-chart"`) {
				charts = append(charts, s)
			}
		}
	}
	return charts, nil
}

var chartSize = regexp.MustCompile(`class="goflash-chart"><div id="[^"]+" style="width:(\d+)px;height:(\d+)px`)

// screenshot puts one chart output on a page with the echarts library,
// checks that Chromium draws it, and saves a PNG of it.
func screenshot(chromium, tmp, output, png string) error {
	w, h := 900, 500
	if m := chartSize.FindStringSubmatch(output); m != nil {
		w, _ = strconv.Atoi(m[1])
		h, _ = strconv.Atoi(m[2])
	}
	var page strings.Builder
	page.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{margin:0;background:#fff}.goflash-chart{margin:0!important}</style></head><body>\n")
	if !strings.Contains(output, "data-goflash-echarts") { // only a session's first output carries it
		page.WriteString(viz.LibraryScript())
	}
	page.WriteString(output)
	page.WriteString("\n</body></html>\n")
	html := filepath.Join(tmp, "page.html")
	if err := os.WriteFile(html, []byte(page.String()), 0o644); err != nil {
		return err
	}
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(tmp, "profile"),
		"--hide-scrollbars", "--force-device-scale-factor=1", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--virtual-time-budget=5000"}
	dom, err := exec.Command(chromium, append(flags, "--dump-dom", "file://"+html)...).Output()
	if err != nil {
		return fmt.Errorf("chromium --dump-dom: %w", err)
	}
	if !strings.Contains(string(dom), "_echarts_instance_") {
		return errors.New("the chart was not drawn in the browser")
	}
	abs, err := filepath.Abs(png)
	if err != nil {
		return err
	}
	cmd := exec.Command(chromium, append(flags, fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+abs, "file://"+html)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium --screenshot: %w: %s", err, b)
	}
	return nil
}
