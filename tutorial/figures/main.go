// Command figures makes the tutorial's PNG figures from the charts the
// notebooks draw, so that a figure is always exactly what the notebook shows:
// it reads executed notebooks (notebooks/run.sh writes them to
// .build/notebooks), puts each chosen chart output on a page of its own with
// the echarts library, checks in headless Chromium that the chart is drawn,
// and takes a screenshot.
//
//	notebooks/run.sh && go run ./tutorial/figures
//	go run ./tutorial/figures -check   # every image the chapters show exists, every figure is shown
//
// Flags: -in (executed notebooks), -out (where the PNGs go), -chromium, -check.
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
// (1-based, in cell order) of a notebook.
var figures = []struct {
	notebook string
	chart    int
	name     string
}{
	{"01_qkv", 1, "01-qkv-scores"},
	{"01_qkv", 2, "01-qkv-symmetry"},
	{"02_naive_memory", 1, "02-memory"},
	{"03_online_softmax", 1, "03-online-softmax"},
	{"04_tiling_forward", 1, "04-tiling"},
	{"05_backward", 1, "05-recomputed-p"},
	{"07_benchmarks", 1, "07-cpu-bench"},
	{"07_benchmarks", 2, "07-cpu-memory"},
}

func main() {
	in := flag.String("in", ".build/notebooks", "directory of executed notebooks (notebooks/run.sh)")
	out := flag.String("out", "tutorial/figures", "directory for the PNGs")
	chromium := flag.String("chromium", "", "Chromium binary (default: chromium or chromium-browser on PATH)")
	checkOnly := flag.Bool("check", false, "only check that the chapters' images exist and every figure is used")
	flag.Parse()
	if *checkOnly {
		if err := checkLinks(filepath.Dir(*out), *out); err != nil {
			fmt.Fprintln(os.Stderr, "figures:", err)
			os.Exit(1)
		}
		fmt.Println("figures: every image the chapters show exists, and every figure is shown")
		return
	}
	if err := run(*in, *out, *chromium); err != nil {
		fmt.Fprintln(os.Stderr, "figures:", err)
		os.Exit(1)
	}
}

func run(in, out, chromium string) error {
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
	cache := map[string][]string{}
	for _, f := range figures {
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
		png := filepath.Join(out, f.name+".png")
		if err := screenshot(chromium, tmp, charts[f.chart-1], png); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		st, err := os.Stat(png)
		if err != nil {
			return err
		}
		fmt.Printf("%s (%s chart %d, %d KB)\n", png, f.notebook, f.chart, st.Size()/1024)
	}
	return nil
}

var imageLink = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)

// checkLinks checks that every image a chapter in dir links to exists and
// that every figure of the table is linked from some chapter.
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
	for _, f := range figures {
		p := filepath.Clean(filepath.Join(figDir, f.name+".png"))
		if !used[p] {
			problems = append(problems, fmt.Sprintf("figure %s is not shown by any chapter", p))
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
