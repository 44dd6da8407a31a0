package viz

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

func TestEmbeddedEChartsIsThePinnedFile(t *testing.T) {
	sum := sha256.Sum256([]byte(echartsJS))
	if got := hex.EncodeToString(sum[:]); got != echartsSHA256 {
		t.Fatalf("assets/echarts.min.js has sha256 %s, assets/README.md records %s", got, echartsSHA256)
	}
	if !strings.Contains(echartsJS, `version="`+EChartsVersion+`"`) {
		t.Fatalf("assets/echarts.min.js does not declare version %s", EChartsVersion)
	}
	if !strings.Contains(echartsNotice, "Apache ECharts") {
		t.Fatal("assets/NOTICE is not the ECharts NOTICE")
	}
}

func TestLibraryScriptRunsWithoutAMD(t *testing.T) {
	s := LibraryScript()
	if strings.Count(strings.ToLower(s), "</script") != 1 {
		t.Fatal("the bundle would end its script element early")
	}
	// The bundle runs inside a function whose define, exports and module are
	// undefined, so the UMD wrapper sets window.echarts even under RequireJS.
	for _, want := range []string{"(function (define, exports, module) {\n", "\n}).call(window);\n</script>", "Apache ECharts " + EChartsVersion, "The Apache Software Foundation"} {
		if !strings.Contains(s, want) {
			t.Errorf("LibraryScript lacks %q", want)
		}
	}
	if regexp.MustCompile(`<script[^>]*\bsrc=`).MatchString(s) {
		t.Error("LibraryScript loads a file")
	}
}

// A chart built with go-echarts directly renders like ours: the ID is
// replaced everywhere the template and %MY_ECHARTS% put it, and the script
// runs inside a function.
func TestRenderForeignChart(t *testing.T) {
	bar := charts.NewBar()
	bar.SetGlobalOptions(charts.WithInitializationOpts(opts.Initialization{ChartID: "mybar", Width: "400px", Height: "300px"}))
	bar.SetXAxis([]string{"a", "b"}).AddSeries("s", []opts.BarData{{Value: 1}, {Value: 2}})
	bar.AddJSFuncStrs(opts.FuncOpts("console.log(%MY_ECHARTS%.getOption().series.length);"))
	out, err := renderChart(bar, "goflash_c7")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "mybar") {
		t.Errorf("old id left in the output:\n%s", out)
	}
	for _, want := range []string{
		`<div id="goflash_c7" style="width:400px;height:300px;max-width:100%">`,
		"getElementById('goflash_c7')", "goecharts_goflash_c7.setOption(option_goflash_c7)",
		"console.log(goecharts_goflash_c7.getOption()", "(function () {", "})();",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := renderChart(bar, "bad-id"); err == nil {
		t.Error("an id that is not a JS identifier was accepted")
	}
	if _, err := renderChart(nil, "x"); err == nil {
		t.Error("a nil chart was accepted")
	}
}

func TestJSValueHasNoQuotesOrBackslashes(t *testing.T) {
	v := jsValue([]string{`a"b`, `c\d`, "é</script>", "'"})
	if strings.ContainsAny(v[len("JSON.parse(decodeURIComponent('"):len(v)-len("'))")], `"\'<>`) {
		t.Fatalf("jsValue payload has quotes, backslashes or angle brackets: %s", v)
	}
}
