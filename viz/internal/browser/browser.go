// Package browser loads pages in headless Chromium for the viz tests and the
// screenshot tool: it reports which echarts instances drew, how much ink each
// left on its canvas, and every JavaScript error, and takes screenshots.
// Chromium runs with networking disabled, so a page that needs the network
// fails here.
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Find returns the Chromium binary: $GOFLASH_CHROMIUM if set, else the first
// of chromium, chromium-browser, google-chrome on PATH.
func Find() (string, error) {
	if p := os.Getenv("GOFLASH_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
}

// Chart is what the probe found in one element carrying an echarts instance.
type Chart struct {
	ID     string   `json:"id"`
	Series []string `json:"series"` // series types, in order
	Names  []string `json:"names"`  // series names
	Width  int      `json:"width"`  // canvas size in pixels
	Height int      `json:"height"`
	Ink    int      `json:"ink"` // pixels that are neither transparent nor near-white
	Error  string   `json:"error"`
}

// Result is what a page showed after loading.
type Result struct {
	Instances int      // elements with an _echarts_instance_ attribute in the final DOM
	Charts    []Chart  // probe output, one per instance
	Errors    []string // uncaught errors, rejections and console.error calls
	Done      bool     // the probe ran to its end
	DOM       string
}

// probe runs first on the page: it records errors from then on and, after
// the page has loaded and painted, describes every echarts instance in
// attributes of <html>, which --dump-dom prints.
const probe = `<script>(function () {
var errs = [], root = document.documentElement;
function rec(m) { errs.push(String(m)); root.setAttribute('data-probe-errors', JSON.stringify(errs)); }
window.addEventListener('error', function (e) { rec('error: ' + (e.message || e) + ' at ' + (e.filename || '') + ':' + (e.lineno || '')); });
window.addEventListener('unhandledrejection', function (e) { rec('unhandled rejection: ' + e.reason); });
var ce = console.error; console.error = function () { rec('console.error: ' + Array.prototype.join.call(arguments, ' ')); return ce.apply(console, arguments); };
window.addEventListener('load', function () { setTimeout(function () {
  var out = [], els = document.querySelectorAll('[_echarts_instance_]');
  for (var i = 0; i < els.length; i++) {
    var el = els[i], c = {id: el.id, series: [], names: [], width: 0, height: 0, ink: 0, error: ''};
    try {
      var opt = echarts.getInstanceByDom(el).getOption();
      for (var s = 0; s < opt.series.length; s++) { c.series.push(opt.series[s].type); c.names.push(String(opt.series[s].name)); }
      var cv = el.querySelector('canvas');
      c.width = cv.width; c.height = cv.height;
      var d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      for (var p = 0; p < d.length; p += 4) { if (d[p + 3] > 0 && (d[p] < 235 || d[p + 1] < 235 || d[p + 2] < 235)) { c.ink++; } }
    } catch (e) { c.error = String(e); }
    out.push(c);
  }
  root.setAttribute('data-probe-charts', JSON.stringify(out));
  root.setAttribute('data-probe-done', '1');
}, 300); });
})();</script>
`

// flags keep Chromium off the network and quiet. Host resolution fails for
// every name, so a page that needs a CDN does not draw.
func flags(userDir string) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + userDir,
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
		"--mute-audio", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000",
	}
}

func run(ctx context.Context, chromium string, args ...string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s: %v\n%s", chromium, err, tail(errb.String(), 2000))
	}
	return out.Bytes(), errb.Bytes(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

var (
	htmlTag = regexp.MustCompile(`(?s)<html\b[^>]*>`)
	attr    = regexp.MustCompile(`(data-probe-[a-z]+)="([^"]*)"`)
	inst    = regexp.MustCompile(`\b_echarts_instance_="`)
)

// Load writes page (a whole HTML document) into dir with the probe added,
// loads it from file:// and reports what it showed.
func Load(ctx context.Context, chromium string, page []byte, dir string) (*Result, error) {
	s := string(page)
	i := strings.Index(s, "<head>")
	if i < 0 {
		return nil, errors.New("browser.Load: page has no <head>")
	}
	s = s[:i+len("<head>")] + "\n" + probe + s[i+len("<head>"):]
	path := filepath.Join(dir, "page.html")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return nil, err
	}
	prof, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(prof)
	out, _, err := run(ctx, chromium, append(flags(prof), "--dump-dom", "file://"+path)...)
	if err != nil {
		return nil, err
	}
	dom := string(out)
	r := &Result{DOM: dom, Instances: len(inst.FindAllStringIndex(dom, -1))}
	tag := htmlTag.FindString(dom)
	for _, m := range attr.FindAllStringSubmatch(tag, -1) {
		v := html.UnescapeString(m[2])
		switch m[1] {
		case "data-probe-errors":
			if err := json.Unmarshal([]byte(v), &r.Errors); err != nil {
				return nil, fmt.Errorf("browser.Load: probe errors: %v", err)
			}
		case "data-probe-charts":
			if err := json.Unmarshal([]byte(v), &r.Charts); err != nil {
				return nil, fmt.Errorf("browser.Load: probe charts: %v", err)
			}
		case "data-probe-done":
			r.Done = true
		}
	}
	return r, nil
}

// Screenshot loads the HTML file at path and saves a width x height PNG of
// the top of the page to png.
func Screenshot(ctx context.Context, chromium, path, png string, width, height int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	pngAbs, err := filepath.Abs(png)
	if err != nil {
		return err
	}
	prof, err := os.MkdirTemp("", "goflash-chromium")
	if err != nil {
		return err
	}
	defer os.RemoveAll(prof)
	if _, _, err := run(ctx, chromium, append(flags(prof),
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--screenshot="+pngAbs, "file://"+abs)...); err != nil {
		return err
	}
	if st, err := os.Stat(pngAbs); err != nil || st.Size() == 0 {
		return fmt.Errorf("browser.Screenshot: chromium wrote no %s", png)
	}
	return nil
}
