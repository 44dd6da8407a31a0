package viz

import (
	_ "embed"
	"strings"
)

// EChartsVersion is the version of the npm package echarts whose
// dist/echarts.min.js is embedded (see assets/README.md; Apache-2.0, NOTICE
// in assets/).
const EChartsVersion = "5.6.0"

// echartsSHA256 is the hash of assets/echarts.min.js, checked by the tests so
// that the vendored file cannot change without the records changing too.
const echartsSHA256 = "bf4a223524e40b77c304bec67e1222cf551f14880cf42c69dc046558e11c07b1"

//go:embed assets/echarts.min.js
var echartsJS string

//go:embed assets/NOTICE
var echartsNotice string

// libraryMarker is an attribute on the library's script element: tests count
// it to check the library is inlined exactly once per page.
const libraryMarker = "data-goflash-echarts"

// LibraryScript returns a <script> element that defines window.echarts from
// the embedded bundle. The bundle is a UMD module: on pages with RequireJS
// (classic Jupyter, nbconvert HTML) it would register an anonymous AMD module
// and never set window.echarts, so it runs inside a function whose define,
// exports and module parameters are undefined, which makes it take its
// browser-global branch.
//
// Include it once per page before any chart; Report does this itself.
func LibraryScript() string {
	var b strings.Builder
	b.Grow(len(echartsJS) + 512)
	b.WriteString("<script " + libraryMarker + "=\"" + EChartsVersion + "\">\n/* Apache ECharts " + EChartsVersion + ", Apache-2.0.\n")
	b.WriteString(strings.ReplaceAll(strings.TrimSpace(echartsNotice), "*/", "* /"))
	b.WriteString("\n*/\n(function (define, exports, module) {\n")
	b.WriteString(echartsJS)
	b.WriteString("\n}).call(window);\n</script>\n")
	return b.String()
}
