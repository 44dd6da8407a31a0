package viz_test

import (
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/bench/benchtest"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/viz"
	"github.com/goflash/goflash/viz/internal/gallery"
)

// pageOf renders charts into a report and returns the HTML.
func pageOf(t *testing.T, cs ...viz.Chart) string {
	t.Helper()
	b, err := viz.Page("test", cs...).HTML()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// series returns the series of a chart as go-echarts will send them.
func series(t *testing.T, c viz.Chart) []map[string]any {
	t.Helper()
	b, err := json.Marshal(c.(interface{ JSON() map[string]any }).JSON()["series"])
	if err != nil {
		t.Fatal(err)
	}
	var s []map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// points returns the [x, y, ...] values of one series.
func points(t *testing.T, s map[string]any) [][]any {
	t.Helper()
	var out [][]any
	for _, d := range s["data"].([]any) {
		out = append(out, d.(map[string]any)["value"].([]any))
	}
	return out
}

func num(v any) float64 { return v.(float64) }

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

var (
	scriptSrc = regexp.MustCompile(`(?i)<script[^>]*\bsrc\s*=`)
	linkTag   = regexp.MustCompile(`(?i)<link\b`)
)

// TestReportIsSelfContained renders every chart into one page: the library
// is inlined exactly once, nothing is loaded from anywhere, IDs are in page
// order, and the bytes do not change between renders.
func TestReportIsSelfContained(t *testing.T) {
	r, cs := testPage(t)
	b, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if n := strings.Count(page, "data-goflash-echarts="); n != 1 {
		t.Errorf("echarts inlined %d times, want once", n)
	}
	if scriptSrc.MatchString(page) || linkTag.MatchString(page) {
		t.Error("the page loads a script or stylesheet from a URL")
	}
	// The bundle names XML namespaces and its licence URL; nothing else on
	// the page may mention a URL (go-echarts' CDN host, say).
	lib := viz.LibraryScript()
	if i := strings.Index(page, lib); i < 0 {
		t.Fatal("library script not found verbatim")
	} else if rest := page[:i] + page[i+len(lib):]; strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
		t.Errorf("page mentions a URL outside the library: %q", rest[max(strings.Index(rest, "http")-80, 0):][:160])
	}
	for i := range cs {
		id := "goflash_c" + strconv.Itoa(i+1)
		if n := strings.Count(page, `<div id="`+id+`"`); n != 1 {
			t.Errorf("%s: %d elements", id, n)
		}
	}
	if n := strings.Count(strings.ToLower(page), "</script"); n != len(cs)+1 {
		t.Errorf("%d script end tags, want %d (library + one per chart): a label ended a script?", n, len(cs)+1)
	}
	if strings.Contains(page, "<script>alert(1)") || strings.Contains(page, "</script><script>document.title") {
		t.Error("hostile text reached the page unescaped")
	}
	again, err := r.HTML()
	if err != nil || string(again) != page {
		t.Error("rendering the same report twice gave different bytes")
	}
	r2, _ := testPage(t)
	if b2, _ := r2.HTML(); string(b2) != page {
		t.Error("building and rendering the same report again gave different bytes")
	}
}

// testPage is the browser test's page without its CPU timings (they change
// from run to run).
func testPage(t *testing.T) (*viz.Report, []viz.Chart) {
	t.Helper()
	sp := []viz.SpeedPoint{
		{Backend: bench.SeriesCPUNaive, B: 1, H: 2, N: 256, D: 64, Millis: 8},
		{Backend: bench.SeriesCPUFlash, B: 1, H: 2, N: 256, D: 64, Millis: 4},
		{Backend: bench.SeriesCPUNaive, B: 1, H: 2, N: 512, D: 64, Millis: 40},
		{Backend: bench.SeriesCPUFlash, B: 1, H: 2, N: 512, D: 64, Millis: 10},
	}
	mp := []viz.MemPoint{{Backend: bench.SeriesCPUNaive, N: 256, Bytes: 600e3}, {Backend: bench.SeriesCPUNaive, N: 512, Bytes: 2.2e6}, {Backend: bench.SeriesCPUFlash, N: 256, Bytes: 70e3}}
	items, err := gallery.Build(gallery.Data{Speed: sp, Baseline: bench.SeriesCPUNaive, Peak: viz.GPUPeak{Name: "test roof", TFLOPs: 1, GBps: 50},
		Mem: mp, MemOptions: viz.MemoryOptions{B: 1, H: 1, D: 64, ScoreHeads: 1, CapacityBytes: 1 << 24, CapacityLabel: "16 MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := viz.AttentionHeatmap([][]float64{{1, 0}, {0.25, 0.75}}, []string{"</script><script>document.title='x'</script>", "<!--"}, []string{"a&b", "__f__"}, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	r := viz.NewReport("test page").AddText("<script>alert(1)</script>\n\nsecond paragraph")
	var cs []viz.Chart
	for _, it := range items {
		r.AddHeading(it.Name).AddChart(it.Chart)
		cs = append(cs, it.Chart)
	}
	r.AddChart(hc).AddTable([]string{"a", "b"}, [][]string{{"1.5", "x"}})
	return r, append(cs, hc)
}

func TestAttentionHeatmapData(t *testing.T) {
	w := [][]float64{{1, 0, 0}, {0.25, 0.75, 0}, {0.1, 0.2, 0.7}}
	c, err := viz.AttentionHeatmap(w, []string{"the", "cat", "the"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	if len(s) != 1 || s[0]["type"] != "heatmap" {
		t.Fatalf("series %v", s)
	}
	ps := points(t, s[0])
	if len(ps) != 9 {
		t.Fatalf("%d cells, want 9", len(ps))
	}
	for _, p := range ps {
		j, i := int(num(p[0])), int(num(p[1]))
		if !near(num(p[2]), w[i][j]) {
			t.Errorf("cell (query %d, key %d) = %v, want %v", i, j, p[2], w[i][j])
		}
	}
	page := pageOf(t, c)
	for _, want := range []string{`{"value":[1,1,0.75]}`, `{"value":[2,2,0.7]}`, `"data":["the","cat","the"]`, `"data":["0","1","2"]`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, bad := range []struct {
		w      [][]float64
		labels []string
	}{
		{nil, nil}, {[][]float64{{1, 0}, {1}}, nil}, {[][]float64{{math.NaN()}}, nil}, {[][]float64{{-1}}, nil}, {[][]float64{{1}}, []string{"a", "b"}},
	} {
		var ie *viz.InputError
		if _, err := viz.AttentionHeatmap(bad.w, bad.labels, nil, ""); !errors.As(err, &ie) {
			t.Errorf("AttentionHeatmap(%v, %v): err %v, want an InputError", bad.w, bad.labels, err)
		}
	}
}

func TestAttentionHeadsGrid(t *testing.T) {
	q, k := gallery.TokenQK(gallery.Sentence, 3, 8, 1)
	var heads [][][]float64
	for h := 0; h < 3; h++ {
		w, err := viz.AttentionWeights(q, k, 0, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, w)
	}
	c, err := viz.AttentionHeads(heads, gallery.Sentence, gallery.Sentence, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	if len(s) != 3 {
		t.Fatalf("%d series, want one per head", len(s))
	}
	for h, x := range s {
		xi, _ := x["xAxisIndex"].(float64)
		yi, _ := x["yAxisIndex"].(float64)
		if int(xi) != h || int(yi) != h || x["name"] != "head "+strconv.Itoa(h) {
			t.Errorf("series %d: name %v, axes %v/%v", h, x["name"], x["xAxisIndex"], x["yAxisIndex"])
		}
		if n := len(points(t, x)); n != len(gallery.Sentence)*len(gallery.Sentence) {
			t.Errorf("head %d has %d cells", h, n)
		}
	}
	gb, _ := json.Marshal(c.JSON()["grid"])
	var grids []any
	if err := json.Unmarshal(gb, &grids); err != nil || len(grids) != 3 {
		n := len(grids)
		t.Errorf("%d grids, want 3", n)
	}
	if _, err := viz.AttentionHeads([][][]float64{heads[0], heads[1][:3]}, nil, nil, 0, ""); err == nil {
		t.Error("heads of different shapes accepted")
	}
}

// AttentionWeights is softmax of Scores, with the causal mask aligned
// bottom-right and GQA head sharing as flashattn defines them; checked
// against flashattn's own CPU forward output O = P V.
func TestAttentionWeightsMatchForward(t *testing.T) {
	for _, c := range []struct {
		nq, nk, hq, hkv int
		causal          bool
	}{{5, 9, 4, 2, true}, {9, 5, 2, 1, true}, {7, 7, 2, 2, false}} {
		q := flashattn.Random(flashattn.Shape{B: 2, N: c.nq, H: c.hq, D: 8}, 1)
		k := flashattn.Random(flashattn.Shape{B: 2, N: c.nk, H: c.hkv, D: 8}, 2)
		v := flashattn.Random(flashattn.Shape{B: 2, N: c.nk, H: c.hkv, D: 8}, 3)
		o := &flashattn.Options{Causal: c.causal, Backend: flashattn.CPUNaive}
		res, err := flashattn.Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < 2; b++ {
			for h := 0; h < c.hq; h++ {
				w, err := viz.AttentionWeights(q, k, b, h, o)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < c.nq; i++ {
					var sum float64
					for j := 0; j < c.nk; j++ {
						sum += w[i][j]
						if c.causal && j > i+c.nk-c.nq && w[i][j] != 0 {
							t.Fatalf("%+v: masked weight (%d,%d) = %v", c, i, j, w[i][j])
						}
					}
					visible := !c.causal || i+c.nk-c.nq >= 0
					if visible && math.Abs(sum-1) > 1e-12 || !visible && sum != 0 {
						t.Fatalf("%+v: row %d sums to %v", c, i, sum)
					}
					for x := 0; x < 8; x++ {
						var o float64
						for j := 0; j < c.nk; j++ {
							o += w[i][j] * float64(v.At(b, j, h/(c.hq/c.hkv), x))
						}
						if got := float64(res.Out.At(b, i, h, x)); math.Abs(got-o) > 1e-5 {
							t.Fatalf("%+v: (b%d h%d i%d x%d): P V = %v, Forward %v", c, b, h, i, x, o, got)
						}
					}
				}
			}
		}
	}
	q := flashattn.Random(flashattn.Shape{B: 1, N: 4, H: 2, D: 8}, 1)
	for _, bh := range [][2]int{{1, 0}, {0, 2}, {-1, 0}} {
		if _, err := viz.Scores(q, q, bh[0], bh[1], nil); err == nil {
			t.Errorf("Scores(b=%d, h=%d) accepted", bh[0], bh[1])
		}
	}
}

// handTrace is a causal 3 x 4 grid (Nq < Nk, bottom-right mask) as flashattn
// would record it.
func handTrace() *flashattn.Trace {
	tr := &flashattn.Trace{Br: 2, Bc: 2, Tr: 3, Tc: 4}
	for i := 0; i < 3; i++ {
		ord := 0
		for j := 0; j < 4; j++ {
			kind := flashattn.StepComputed
			switch {
			case j == i+1:
				kind = flashattn.StepMasked
			case j > i+1:
				kind = flashattn.StepSkipped
			}
			o := -1
			if kind != flashattn.StepSkipped {
				o, ord = ord, ord+1
			}
			tr.Steps = append(tr.Steps, flashattn.TraceStep{QBlock: i, KBlock: j, Kind: kind, Order: o})
		}
	}
	return tr
}

func TestTilingFromTrace(t *testing.T) {
	tr := handTrace()
	c, err := viz.Tiling(tr)
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	if len(s) != 3 || s[0]["name"] != "computed" || s[1]["name"] != "masked (on the diagonal)" || s[2]["name"] != "skipped (above the diagonal)" {
		t.Fatalf("series %v", s)
	}
	got := map[[2]int][2]float64{}
	for k, x := range s {
		for _, p := range points(t, x) {
			got[[2]int{int(num(p[1])), int(num(p[0]))}] = [2]float64{float64(k), num(p[2])}
		}
	}
	if len(got) != 12 {
		t.Fatalf("%d cells, want 12", len(got))
	}
	for _, st := range tr.Steps {
		g := got[[2]int{st.QBlock, st.KBlock}]
		if int(g[0]) != int(st.Kind) || int(g[1]) != st.Order+1 {
			t.Errorf("step (%d,%d): drawn as kind %v order %v, want %v order %d", st.QBlock, st.KBlock, g[0], g[1], st.Kind, st.Order+1)
		}
	}
	for _, bad := range []*flashattn.Trace{nil, {}, {Tr: 1, Tc: 1, Steps: []flashattn.TraceStep{{QBlock: 1}}},
		{Tr: 1, Tc: 1, Steps: []flashattn.TraceStep{{}, {}}}} {
		if _, err := viz.Tiling(bad); err == nil {
			t.Errorf("Tiling(%+v) accepted", bad)
		}
	}
}

// The traced row's running m and l equal the exact max and sum of the keys
// seen so far, and the chart draws those very numbers.
func TestOnlineSoftmaxAgainstExact(t *testing.T) {
	tr, ref, err := gallery.TracedForward(160, 130, 5)
	if err != nil {
		t.Fatal(err)
	}
	c, err := viz.OnlineSoftmax(tr, ref)
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	names := []string{}
	for _, x := range s {
		names = append(names, x["name"].(string))
	}
	want := "running max m,exact row max,exact max of keys so far,rescale exp(m_old - m_new), right axis,running sum l,exact row sum,exact sum of keys so far"
	if strings.Join(names, ",") != want {
		t.Fatalf("series %q", names)
	}
	data := func(i int) []float64 {
		var out []float64
		for _, d := range s[i]["data"].([]any) {
			out = append(out, num(d.(map[string]any)["value"]))
		}
		return out
	}
	m, pm, l, pl, resc := data(0), data(2), data(4), data(6), data(3)
	if len(m) != len(tr.RowSteps) || len(m) != 5 { // row 130, causal, Bc 32: K blocks 0..4
		t.Fatalf("%d points for %d row steps", len(m), len(tr.RowSteps))
	}
	for i, st := range tr.RowSteps {
		if m[i] != st.M || l[i] != st.L || resc[i] != st.Rescale {
			t.Errorf("step %d drawn as m %v l %v rescale %v, trace has %+v", i, m[i], l[i], resc[i], st)
		}
		// float32 running state against float64 prefix statistics.
		if math.Abs(m[i]-pm[i]) > 1e-5*math.Abs(pm[i]) || math.Abs(l[i]-pl[i]) > 1e-5*pl[i] {
			t.Errorf("K block %d: running m %v l %v, exact prefix %v %v", st.KBlock, m[i], l[i], pm[i], pl[i])
		}
	}
	exact := viz.RowStatsOf(ref.Scores)
	if near(data(1)[0], exact.Max) != true || !near(data(5)[0], exact.Sum) {
		t.Errorf("exact lines at %v, %v; want %+v", data(1)[0], data(5)[0], exact)
	}
	// Without scores, only the final exact values are drawn.
	c2, err := viz.OnlineSoftmax(tr, viz.SoftmaxReference{Exact: exact})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(series(t, c2)); n != 5 {
		t.Errorf("%d series without scores, want 5", n)
	}
	if _, err := viz.OnlineSoftmax(&flashattn.Trace{}, ref); err == nil {
		t.Error("empty trace accepted")
	}
	if _, err := viz.OnlineSoftmax(tr, viz.SoftmaxReference{Exact: viz.RowStats{Max: 1, Sum: math.NaN()}}); err == nil {
		t.Error("NaN reference accepted")
	}
}

func TestRowStatsOf(t *testing.T) {
	inf := math.Inf(-1)
	st := viz.RowStatsOf([]float64{1, inf, 3, 2})
	if st.Max != 3 || !near(st.Sum, math.Exp(-2)+1+math.Exp(-1)) {
		t.Errorf("%+v", st)
	}
	if st := viz.RowStatsOf([]float64{inf, inf}); !math.IsInf(st.Max, -1) || st.Sum != 0 {
		t.Errorf("all masked: %+v", st)
	}
}

func TestAttentionBytes(t *testing.T) {
	d := flashattn.Dims{B: 2, Nq: 1024, Nk: 512, Hq: 8, Hkv: 2, D: 64}
	naive, flash := viz.AttentionBytes(d, 2, 16)
	qo := 2.0 * 2 * 1024 * 8 * 64 // Q and O, fp16
	kv := 2.0 * 2 * 512 * 2 * 64  // K and V
	lse := 4.0 * 2 * 8 * 1024     // float32 per row
	sp := 2.0 * 2 * 16 * 1024 * 512
	if !near(flash, 2*qo+2*kv+lse) || !near(naive, 2*qo+2*kv+sp) {
		t.Errorf("naive %v flash %v", naive, flash)
	}
	if in := viz.InputBytes(d, 2); !near(in, qo+2*kv) {
		t.Errorf("inputs %v", in)
	}
}

func TestMemoryChart(t *testing.T) {
	pts := []viz.MemPoint{{Backend: "cpu-naive", N: 512, Bytes: 3e6}, {Backend: "cpu-flash", N: 512, Bytes: 2e5}, {Backend: "cpu-naive", N: 256, Bytes: 1e6}}
	c, err := viz.Memory(pts, viz.MemoryOptions{B: 1, H: 32, D: 128, ElemBytes: 2, CapacityBytes: 16e9, CapacityLabel: "T4: 16 GB"})
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	var names []string
	for _, x := range s {
		names = append(names, x["name"].(string))
	}
	if strings.Join(names, "|") != "cpu-naive (measured)|cpu-flash (measured)|naive (formula)|flash (formula)|T4: 16 GB" {
		t.Fatalf("series %q", names)
	}
	if p := points(t, s[0]); num(p[0][0]) != 256 || num(p[0][1]) != 1e6 || num(p[1][0]) != 512 {
		t.Errorf("measured naive not sorted by N: %v", p)
	}
	// The formula runs past the point where naive needs 4x the capacity.
	f := points(t, s[2])
	last := f[len(f)-1]
	n := int(num(last[0]))
	naive, _ := viz.AttentionBytes(flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 32, Hkv: 32, D: 128}, 2, 32)
	if !near(num(last[1]), naive) || naive <= 4*16e9 {
		t.Errorf("formula ends at N=%d, %v bytes", n, num(last[1]))
	}
	if c := points(t, s[4]); num(c[0][1]) != 16e9 || num(c[1][0]) != float64(n) {
		t.Errorf("capacity line %v", c)
	}
	if !strings.Contains(pageOf(t, c), `"logBase":2`) {
		t.Error("no log base 2 on the axes")
	}
	// Without inputs, the formula drops Q, K, V.
	c2, _ := viz.Memory(nil, viz.MemoryOptions{B: 1, H: 1, D: 64, WithoutInputs: true, FormulaN: []int{1024}})
	_, fl := viz.AttentionBytes(flashattn.Dims{B: 1, Nq: 1024, Nk: 1024, Hq: 1, Hkv: 1, D: 64}, 4, 1)
	in := viz.InputBytes(flashattn.Dims{B: 1, Nq: 1024, Nk: 1024, Hq: 1, Hkv: 1, D: 64}, 4)
	if got := num(points(t, series(t, c2)[1])[0][1]); !near(got, fl-in) {
		t.Errorf("flash without inputs %v, want %v", got, fl-in)
	}
	for _, bad := range []struct {
		p []viz.MemPoint
		o viz.MemoryOptions
	}{{nil, viz.MemoryOptions{}}, {[]viz.MemPoint{{Backend: "x", N: 0, Bytes: 1}}, viz.MemoryOptions{}}, {pts, viz.MemoryOptions{B: 1}},
		{[]viz.MemPoint{{Backend: "x", N: 1, Bytes: math.Inf(1)}}, viz.MemoryOptions{}}} {
		if _, err := viz.Memory(bad.p, bad.o); err == nil {
			t.Errorf("Memory(%v, %+v) accepted", bad.p, bad.o)
		}
	}
}

func TestSpeedCharts(t *testing.T) {
	pts := []viz.SpeedPoint{
		{Backend: bench.SeriesGPUFlash, B: 1, H: 1, N: 1024, D: 64, Millis: 1},
		{Backend: bench.SeriesSDPAMath, B: 1, H: 1, N: 1024, D: 64, Millis: 4},
		{Backend: bench.SeriesGPUFlash, B: 1, H: 1, N: 512, D: 64, TFLOPs: 0.1},
		{Backend: bench.SeriesSDPAMath, B: 1, H: 1, N: 512, D: 64, TFLOPs: 0.02},
		{Backend: bench.SeriesSDPAMath, B: 1, H: 1, N: 2048, D: 64, Millis: 50},
	}
	c, err := viz.Speed(pts, viz.SpeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, c)
	if len(s) != 2 || s[0]["name"] != bench.SeriesGPUFlash || s[1]["name"] != bench.SeriesSDPAMath {
		t.Fatalf("series %v", s)
	}
	// 4*1024*1024*64 FLOPs in 1 ms.
	p := points(t, s[0])
	if num(p[0][0]) != 512 || num(p[0][1]) != 0.1 || num(p[1][0]) != 1024 || !near(num(p[1][1]), 0.268435456) {
		t.Errorf("gpu-flash points %v", p)
	}
	if !strings.Contains(p[1][2].(string), "B=1 H=1 N=1024 D=64: 1 ms, 0.2684 TFLOP/s") {
		t.Errorf("tooltip text %q", p[1][2])
	}
	up, err := viz.Speedup(pts, bench.SeriesSDPAMath, viz.SpeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	us := series(t, up)
	if len(us) != 2 || us[0]["name"] != bench.SeriesGPUFlash || us[1]["name"] != "sdpa-math (= 1)" {
		t.Fatalf("speedup series %v", us)
	}
	if p := points(t, us[0]); len(p) != 2 || !near(num(p[0][1]), 5) || !near(num(p[1][1]), 4) {
		t.Errorf("speedups %v, want 5 (rates) at 512 and 4 (times) at 1024", p)
	}
	if _, err := viz.Speedup(pts, "nobody", viz.SpeedOptions{}); err == nil {
		t.Error("missing baseline accepted")
	}
	roof, err := viz.Roofline(pts, viz.GPUPeak{Name: "G", TFLOPs: 100, GBps: 1000}, viz.SpeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := series(t, roof)
	if rs[0]["name"] != "G roof" {
		t.Fatalf("roofline series %v", rs)
	}
	// Minimum traffic 8*N*D bytes against 4*N*N*D FLOPs: N/2 FLOP per byte.
	if p := points(t, rs[1]); !near(num(p[0][0]), 256) || !near(num(p[1][0]), 512) {
		t.Errorf("intensities %v, want 256 and 512", p)
	}
	// The roof bends at peak/bandwidth = 100 FLOP/byte.
	r := points(t, rs[0])
	if len(r) != 3 || !near(num(r[1][0]), 100) || !near(num(r[1][1]), 100) || !near(num(r[0][1]), num(r[0][0])) {
		t.Errorf("roof %v", r)
	}
	for _, bad := range [][]viz.SpeedPoint{nil, {{Backend: "x", N: 1, D: 1}}, {{Backend: "x", N: 1, D: 1, Millis: math.NaN(), B: 1, H: 1}}, {{N: 1, D: 1, TFLOPs: 1}}} {
		if _, err := viz.Speed(bad, viz.SpeedOptions{}); err == nil {
			t.Errorf("Speed(%v) accepted", bad)
		}
	}
	if _, err := viz.Roofline(pts, viz.GPUPeak{TFLOPs: 1}, viz.SpeedOptions{}); err == nil {
		t.Error("peak without bandwidth accepted")
	}
	// Points mixing D and causality get one series each.
	mixed := append(pts[:1:1], viz.SpeedPoint{Backend: bench.SeriesGPUFlash, B: 1, H: 1, N: 1024, D: 128, Causal: true, Millis: 1})
	c3, _ := viz.Speed(mixed, viz.SpeedOptions{})
	if s := series(t, c3); len(s) != 2 || s[0]["name"] != "gpu-flash D=64 full" || s[1]["name"] != "gpu-flash D=128 causal" {
		t.Errorf("mixed series %v", s)
	}
}

func TestReportTables(t *testing.T) {
	r := viz.NewReport("t").AddTable([]string{"a", "b"}, [][]string{{"1"}})
	if _, err := r.HTML(); err == nil {
		t.Error("ragged table accepted")
	}
	r = viz.NewReport("t & u").AddTable([]string{"backend", "ms"}, [][]string{{"<b>", "1.25"}, {"x", "2.5x"}})
	b, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<title>t &amp; u</title>", "<td>&lt;b&gt;</td>", `<td class="num">1.25</td>`, `<td class="num">2.5x</td>`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %s", want)
		}
	}
	if _, err := viz.NewReport("t").AddChart(nil).HTML(); err == nil {
		t.Error("nil chart accepted")
	}
}

// Importing viz must not need GoNB: only viz/nb does.
func TestVizDoesNotImportGoNB(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/goflash/goflash/viz").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "gonb") {
		t.Fatal("package viz depends on GoNB")
	}
}

// A T4 answer: PyTorch has no flash backend there, so a speedup over
// SDPAFlash falls back to SDPAEfficient and says so.
func TestSpeedupFallsBackToTheBaselineThatRan(t *testing.T) {
	pts := []viz.SpeedPoint{
		{Backend: bench.SeriesGPUFlash, B: 1, H: 1, N: 1024, D: 64, Millis: 1},
		{Backend: bench.SeriesSDPAEfficient, B: 1, H: 1, N: 1024, D: 64, Millis: 2},
		{Backend: bench.SeriesSDPAMath, B: 1, H: 1, N: 1024, D: 64, Millis: 8},
	}
	if _, err := viz.Speedup(pts, bench.SeriesSDPAFlash, viz.SpeedOptions{}); err == nil || !strings.Contains(err.Error(), `"sdpa-flash" has no points`) {
		t.Fatalf("no fallback: err %v", err)
	}
	up, err := viz.Speedup(pts, bench.SeriesSDPAFlash, viz.SpeedOptions{Subtitle: "T4", Fallbacks: []string{bench.SeriesSDPAEfficient}})
	if err != nil {
		t.Fatal(err)
	}
	s := series(t, up)
	if len(s) != 3 || s[0]["name"] != bench.SeriesGPUFlash || s[2]["name"] != "sdpa-efficient (= 1)" {
		t.Fatalf("series %v", s)
	}
	if p := points(t, s[0]); !near(num(p[0][1]), 2) {
		t.Errorf("gpu-flash over efficient %v, want 2", p)
	}
	if p := points(t, s[1]); !near(num(p[0][1]), 0.25) {
		t.Errorf("math over efficient %v, want 0.25", p)
	}
	title := up.JSON()["title"]
	b, _ := json.Marshal(title)
	if !strings.Contains(string(b), `T4\nbaseline sdpa-efficient: sdpa-flash has no points`) || !strings.Contains(string(b), "Speedup over sdpa-efficient") {
		t.Errorf("title does not say which baseline: %s", b)
	}
}

// Rows of a T4 run (PyTorch without flash) and GoFlash's: the points are the
// rows that ran, named by their series, and the speedup is over the baseline
// bench chooses.
func TestSpeedPointsOfBenchRows(t *testing.T) {
	spec := bench.Spec{Reps: 1, Emulate: bench.EmulateSM75, Backends: bench.TorchBackends, Directions: []string{bench.DirFwd}}
	for _, n := range []int{64, 128} {
		spec.Shapes = append(spec.Shapes, bench.ShapeOf(flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 4, Hkv: 4, D: 32}, true))
	}
	out, err := benchtest.Answer(benchtest.T4, spec)
	if err != nil {
		t.Fatal(err)
	}
	rows := out.Rows()
	for _, sh := range spec.Shapes {
		rows = append(rows, bench.Row{Impl: bench.ImplGPU, Direction: bench.DirFwd, Shape: sh, Status: bench.StatusOK, MS: 0.5, TFLOPs: 3e-3})
	}
	rows = append(rows,
		bench.Row{Impl: bench.ImplGPUDet, Direction: bench.DirFwd, Shape: spec.Shapes[0], Status: bench.StatusError, Reason: "boom"},
		bench.Row{Impl: bench.ImplCPUFlash, Direction: bench.DirFwd, Shape: spec.Shapes[0], Status: bench.StatusOK})
	pts := viz.SpeedPoints(rows, nil)
	count := map[string]int{}
	for _, p := range pts {
		count[p.Backend]++
	}
	if len(pts) != 6 || count[bench.SeriesGPUFlash] != 2 || count[bench.SeriesSDPAEfficient] != 2 || count[bench.SeriesSDPAMath] != 2 {
		t.Fatalf("points per series %v, want gpu-flash, sdpa-efficient and sdpa-math at 2 shapes each", count)
	}
	if kept := viz.SpeedPoints(rows, func(r bench.Row) bool { return r.Nq == 128 }); len(kept) != 3 || kept[0].N != 128 {
		t.Errorf("keep N = 128: %+v", kept)
	}
	base, ok := bench.ChooseBaseline(rows)
	if !ok || base.Series != bench.SeriesSDPAEfficient {
		t.Fatalf("baseline %+v, %v", base, ok)
	}
	c, err := viz.Speedup(pts, base.Series, viz.SpeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Title.Title != "Speedup over sdpa-efficient" {
		t.Errorf("title %q", c.Title.Title)
	}

	r := bench.Row{Impl: bench.ImplGPUSM80, Shape: bench.Shape{B: 2, Hq: 4, Hkv: 4, Nq: 64, Nk: 64, D: 32, Causal: true},
		Status: bench.StatusError, MS: 1.5, TFLOPs: 2}
	want := viz.SpeedPoint{Backend: "gpu-flash (sm_80 path)", B: 2, N: 64, H: 4, D: 32, Causal: true, Millis: 1.5, TFLOPs: 2}
	if got := viz.SpeedPointOf(r); got != want {
		t.Errorf("SpeedPointOf = %+v, want %+v", got, want)
	}
}

// bench's series keep their colours whatever their order in a chart; other
// names take the palette colour of their place (the fourth: red).
func TestSeriesColours(t *testing.T) {
	pts := []viz.SpeedPoint{
		{Backend: bench.SeriesSDPAMath, B: 1, H: 1, N: 1024, D: 64, Millis: 4},
		{Backend: bench.SeriesGPUFlash, B: 1, H: 1, N: 1024, D: 64, Millis: 1},
		{Backend: bench.SeriesCPUNaive, B: 1, H: 1, N: 1024, D: 64, Millis: 9},
		{Backend: "mine", B: 1, H: 1, N: 1024, D: 64, Millis: 2},
	}
	c, err := viz.Speed(pts, viz.SpeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{bench.SeriesSDPAMath: "#009E73", bench.SeriesGPUFlash: "#0072B2", bench.SeriesCPUNaive: "#8c8c8c", "mine": "#D55E00"}
	s := series(t, c)
	if len(s) != len(want) {
		t.Fatalf("%d series, want %d", len(s), len(want))
	}
	for _, x := range s {
		if name, _ := x["name"].(string); x["color"] != want[name] {
			t.Errorf("series %q colour %v, want %s", name, x["color"], want[name])
		}
	}
}

// TestBadInputIsInputError: inputs a chart cannot draw honestly are an
// *InputError, not a panic, a page no browser loads, or a chart that lies.
func TestBadInputIsInputError(t *testing.T) {
	square := func(n int) [][]float64 {
		w := make([][]float64, n)
		for i := range w {
			w[i] = make([]float64, n)
			w[i][0] = 1
		}
		return w
	}
	big := square(257) // one row past MaxHeatCells' 256 x 256
	speed := []viz.SpeedPoint{
		{Backend: "a", B: 1, N: 128, H: 1, D: 64, TFLOPs: 1},
		{Backend: "base", B: 1, N: 128, H: 1, D: 64, TFLOPs: 2},
		{Backend: "base", B: 1, N: 128, H: 1, D: 64, TFLOPs: 3}, // the same shape twice
	}
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"heatmap past MaxHeatCells", func() error { _, err := viz.AttentionHeatmap(big, nil, nil, "x"); return err }},
		{"tiling grid past MaxHeatCells", func() error {
			_, err := viz.Tiling(&flashattn.Trace{Tr: 300, Tc: 300, Steps: []flashattn.TraceStep{{}}})
			return err
		}},
		{"heads past MaxHeatCells together", func() error {
			_, err := viz.AttentionHeads([][][]float64{square(200), square(200)}, nil, nil, 0, "x")
			return err
		}},
		{"Speedup over a baseline with one shape twice", func() error { _, err := viz.Speedup(speed, "base", viz.SpeedOptions{}); return err }},
		{"Speed with an infinite rate", func() error {
			_, err := viz.Speed([]viz.SpeedPoint{{Backend: "a", B: 1, N: 128, H: 1, D: 64, Millis: 1e-320}}, viz.SpeedOptions{})
			return err
		}},
		{"Memory with negative element bytes", func() error {
			_, err := viz.Memory(nil, viz.MemoryOptions{B: 1, H: 1, D: 64, ElemBytes: -4})
			return err
		}},
	} {
		var ie *viz.InputError
		if err := c.call(); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an *InputError", c.what, err)
		}
	}
	// A nil q is flashattn's typed error (Scores checks it), not a panic.
	var de *flashattn.DataError
	if _, err := viz.TracedRow(nil, nil, &flashattn.Trace{}, nil); !errors.As(err, &de) {
		t.Errorf("TracedRow of nil q: %v, want a *flashattn.DataError", err)
	}
	// Only a matrix whose rows sum to 1 is called a softmax's.
	for _, c := range []struct {
		w    [][]float64
		sums bool
	}{{[][]float64{{0.5, 0.2}, {0, 0}}, false}, {[][]float64{{0.25, 0.75}, {1, 0}}, true}} {
		h, err := viz.AttentionHeatmap(c.w, nil, nil, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(pageOf(t, h), "sums to 1"); got != c.sums {
			t.Errorf("%v: subtitle says each row sums to 1: %v, want %v", c.w, got, c.sums)
		}
	}
}
