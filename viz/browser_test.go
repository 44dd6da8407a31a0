package viz_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/viz"
	"github.com/goflash/goflash/viz/internal/browser"
	"github.com/goflash/goflash/viz/internal/gallery"
)

// fakeAMD stands in for RequireJS (classic Jupyter, nbconvert HTML): a page
// with a global define.amd. A UMD bundle loaded plainly registers itself
// with it and never sets window.echarts; the viz loader must not.
const fakeAMD = `<script>window.define = function () { window.__amdDefines = (window.__amdDefines || 0) + 1; }; window.define.amd = {};</script>`

// hostile labels must stay text: they may not end the chart's script or run.
var hostile = []string{"</script><script>document.title='pwned'</script>", "<!--", "a&b", "\"q\"", "__f__", "<b>x</b>"}

// browserPage builds the report the browser test loads: every gallery chart
// (speed and memory from small real CPU runs) and a heatmap with hostile
// labels.
func browserPage(t *testing.T) (*viz.Report, []viz.Chart) {
	t.Helper()
	sp, mp, err := gallery.MeasureCPU(1, 1, 32, []int{64, 128, 256}, 1)
	if err != nil {
		t.Fatal(err)
	}
	items, err := gallery.Build(gallery.Data{
		Speed: sp, SpeedSubtitle: "CPU, test run", Baseline: bench.SeriesCPUNaive,
		// Any roof works for the test; it is not a claim about this CPU.
		Peak: viz.GPUPeak{Name: "test roof", TFLOPs: 1, GBps: 50},
		Mem:  mp, MemOptions: viz.MemoryOptions{B: 1, H: 1, D: 32, ScoreHeads: 1, CapacityBytes: 1 << 20, CapacityLabel: "1 MiB line"},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := [][]float64{{1, 0, 0, 0, 0, 0}, {.5, .5, 0, 0, 0, 0}, {.2, .2, .6, 0, 0, 0}, {.1, .2, .3, .4, 0, 0}, {0, 0, 0, 0, 1, 0}, {.1, .1, .1, .1, .1, .5}}
	hc, err := viz.AttentionHeatmap(w, hostile, hostile, "hostile labels </script>")
	if err != nil {
		t.Fatal(err)
	}
	r := viz.NewReport("viz browser test")
	var cs []viz.Chart
	for _, it := range items {
		r.AddHeading(it.Name).AddChart(it.Chart)
		cs = append(cs, it.Chart)
	}
	r.AddHeading("hostile labels").AddChart(hc)
	cs = append(cs, hc)
	r.AddTable([]string{"chart", "series"}, [][]string{{"<script>alert(1)</script>", "1"}})
	return r, cs
}

// TestBrowser loads a page with every chart in headless Chromium (network
// off), plainly and under a RequireJS-like AMD define, and checks that every
// chart drew: one echarts instance per chart, holding the series we sent,
// with ink on its canvas, and no JavaScript error. It skips without Chromium
// unless GOFLASH_REQUIRE_BROWSER=1. Screenshots go to $GOFLASH_BROWSER_OUT
// (kept) or a temporary directory.
func TestBrowser(t *testing.T) {
	chromium, err := browser.Find()
	if err != nil {
		if os.Getenv("GOFLASH_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GOFLASH_REQUIRE_BROWSER=1 but %v", err)
		}
		t.Skipf("skipping the browser test: %v (set GOFLASH_REQUIRE_BROWSER=1 to fail instead)", err)
	}
	out := os.Getenv("GOFLASH_BROWSER_OUT")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	r, cs := browserPage(t)
	page, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	for _, variant := range []struct{ name, inject string }{{"plain", ""}, {"requirejs", fakeAMD}} {
		t.Run(variant.name, func(t *testing.T) {
			p := strings.Replace(string(page), "<head>", "<head>\n"+variant.inject, 1)
			dir := filepath.Join(out, variant.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			res, err := browser.Load(context.Background(), chromium, []byte(p), dir)
			if err != nil {
				t.Fatal(err)
			}
			checkDrawn(t, res, cs)
			if strings.Contains(res.DOM, "<title>pwned") {
				t.Error("a hostile label ran as script")
			}
			if variant.inject != "" && !strings.Contains(res.DOM, "_echarts_instance_") {
				t.Error("nothing drew under the AMD define")
			}
			png := filepath.Join(dir, "page.png")
			if err := browser.Screenshot(context.Background(), chromium, filepath.Join(dir, "page.html"), png, 960, 560*len(cs)+400); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", png)
		})
	}
}

func checkDrawn(t *testing.T, res *browser.Result, cs []viz.Chart) {
	t.Helper()
	if len(res.Errors) > 0 {
		t.Errorf("JavaScript errors:\n%s", strings.Join(res.Errors, "\n"))
	}
	if !res.Done {
		t.Fatal("the probe did not finish (page never loaded?)")
	}
	if res.Instances != len(cs) {
		t.Errorf("%d drawn echarts instances, want %d (one per chart)", res.Instances, len(cs))
	}
	if len(res.Charts) != len(cs) {
		t.Fatalf("probe saw %d charts, want %d", len(res.Charts), len(cs))
	}
	for i, c := range cs {
		got := res.Charts[i]
		want := seriesOf(t, c)
		if got.Error != "" {
			t.Errorf("chart %d (%s): %s", i+1, got.ID, got.Error)
			continue
		}
		if wantID := "goflash_c" + itoa(i+1); got.ID != wantID {
			t.Errorf("chart %d has id %q, want %q", i+1, got.ID, wantID)
		}
		if strings.Join(got.Series, ",") != strings.Join(want.types, ",") || len(got.Names) != len(want.names) {
			t.Errorf("chart %d (%s): echarts holds series %v %q, we sent %v %q", i+1, got.ID, got.Series, got.Names, want.types, want.names)
		}
		// A drawn chart inks a few percent of its canvas at least (axes,
		// labels, data); a blank or failed one inks none.
		if got.Width == 0 || got.Ink < got.Width*got.Height/100 {
			t.Errorf("chart %d (%s): %d inked pixels on a %dx%d canvas: not drawn", i+1, got.ID, got.Ink, got.Width, got.Height)
		}
	}
}

type sent struct{ types, names []string }

// seriesOf reads the series types and names from the options go-echarts
// produces for c.
func seriesOf(t *testing.T, c viz.Chart) sent {
	t.Helper()
	j, ok := c.(interface{ JSON() map[string]any })
	if !ok {
		t.Fatalf("%T has no JSON method", c)
	}
	b, err := json.Marshal(j.JSON()["series"])
	if err != nil {
		t.Fatal(err)
	}
	var ss []struct{ Type, Name string }
	if err := json.Unmarshal(b, &ss); err != nil {
		t.Fatal(err)
	}
	var s sent
	for _, x := range ss {
		s.types = append(s.types, x.Type)
		s.names = append(s.names, x.Name)
	}
	return s
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
