package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/viz"
)

// t4Peak is a T4's data sheet: 65 TFLOP/s of fp16 tensor-core math (40 SMs
// x 8 tensor cores x 64 FMA per clock x 2 x 1.59 GHz) and 320 GB/s of GDDR6,
// the numbers viz's Roofline example uses.
var t4Peak = viz.GPUPeak{Name: "T4", TFLOPs: 65, GBps: 320}

// knownPeaks are data-sheet peaks (dense fp16 tensor-core math, memory
// bandwidth) of the GPUs the tutorial and the published results name,
// matched against a device name; any other GPU needs -peak-tflops and
// -peak-gbps.
var knownPeaks = []struct {
	match *regexp.Regexp
	peak  viz.GPUPeak
}{
	{regexp.MustCompile(`\bT4\b`), t4Peak},
	{regexp.MustCompile(`\bH100\b.*\bHBM3\b`), viz.GPUPeak{Name: "H100 SXM", TFLOPs: 989, GBps: 3350}},
	{regexp.MustCompile(`\bH200\b`), viz.GPUPeak{Name: "H200", TFLOPs: 989, GBps: 4800}},
}

// peakOf returns the data-sheet peak of a device name, if known.
func peakOf(device string) (viz.GPUPeak, bool) {
	for _, k := range knownPeaks {
		if k.match.MatchString(device) {
			return k.peak, true
		}
	}
	return viz.GPUPeak{}, false
}

// bound is one workload of chapter 6's roofline: its FLOPs per byte of
// device-memory traffic, drawn on the T4's roof (the best it can do there).
type bound struct {
	name, what string
	flops      float64 // per call
	bytes      float64 // device-memory traffic per call
}

// t4Bounds are the workloads chapter 6 places on the T4's roofline.
func t4Bounds() []bound {
	const d = 64
	fwd := func(n int, causal bool) float64 {
		return flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 1, Hkv: 1, D: d}.FLOPs(causal)
	}
	qkvo := func(n int) float64 { return 2 * 4 * float64(n) * d } // Q, K, V read, O written, fp16
	// Decode: Llama-3-8B's attention (32 query heads over 8 kv heads, d 128)
	// against a 128k-entry cache reads every cached K and V byte once.
	dec := flashattn.Dims{B: 1, Nq: 1, Nk: 131072, Hq: 32, Hkv: 8, D: 128}
	n := 4096
	tr := float64(n / 128) // the T4 kernel's query blocks (Br = 128): each reads all of K and V
	return []bound{
		{"decode step", "one new row of Llama-3-8B's attention against a 128k-entry cache (K and V read once)",
			dec.FLOPs(false), float64(bench.ShapeOf(dec, false).KVBytes())},
		{"naive, d 64", "S and P written and read back in fp16 (chapter 2), N = 4096",
			fwd(n, false), qkvo(n) + 4*float64(n)*float64(n)*2},
		{"FA2, K/V from DRAM per block", "N = 4096, d = 64, every 128-row block re-reading K and V from GDDR6 (no L2 hits)",
			fwd(n, false), 2 * (2*float64(n)*d + tr*2*float64(n)*d)},
		{"FA2, N 128", "N = 128, d = 64, least traffic (Q, K, V read once, O written once)",
			fwd(128, false), qkvo(128)},
		{"FA2, N 4096", "N = 4096, d = 64, least traffic (Q, K, V read once, O written once)",
			fwd(n, false), qkvo(n)},
	}
}

// t4Roofline is chapter 6's roofline: the T4's roof with each workload of
// t4Bounds on it, at the best rate its intensity allows (not a measurement).
func t4Roofline() (*charts.Line, error) {
	bs := t4Bounds()
	roof := func(i float64) float64 { return math.Min(t4Peak.TFLOPs, t4Peak.GBps*1e9*i/1e12) }
	var pts []viz.SpeedPoint
	for _, b := range bs {
		// One (batch, head) of d 64: viz computes the intensity from the
		// FA2 FLOP count of this shape over Bytes, so Bytes is scaled to
		// keep the workload's own FLOPs per byte.
		p := viz.SpeedPoint{Backend: b.name, B: 1, H: 1, N: 4096, D: 64}
		f := flashattn.Dims{B: 1, Nq: p.N, Nk: p.N, Hq: 1, Hkv: 1, D: p.D}.FLOPs(false)
		p.Bytes = f * b.bytes / b.flops
		p.TFLOPs = roof(b.flops / b.bytes)
		pts = append(pts, p)
	}
	c, err := viz.Roofline(pts, t4Peak, viz.SpeedOptions{Title: "The T4's roofline: where attention's workloads can sit",
		Subtitle: "each point is a workload's best case on the roof, from its FLOPs and bytes (not a measurement)"})
	if err != nil {
		return nil, err
	}
	// The tooltips name the workloads, not the stand-in shape.
	for i := range c.MultiSeries {
		data, ok := c.MultiSeries[i].Data.([]opts.LineData)
		if !ok || i == 0 {
			continue
		}
		b := bs[i-1]
		for k := range data {
			v := data[k].Value.([3]any)
			x := b.flops / b.bytes
			v[2] = fmt.Sprintf("%s: %s; %.3g FLOP/byte, at most %.3g TFLOP/s", b.name, b.what, x, roof(x))
			data[k].Value = v
		}
	}
	return c, nil
}

// runRoofline draws the forward rows of a goflash bench.json on the
// roofline of the GPU that ran them and prints each row's share of the
// peak: the data-sheet peak of a known GPU, or the one given.
func runRoofline(path string, peak viz.GPUPeak, report string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res bench.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if res.Schema != bench.Schema {
		return fmt.Errorf("%s: schema %q, want %s (a goflash bench bench.json)", path, res.Schema, bench.Schema)
	}
	if res.Device.Kind != "gpu" {
		return fmt.Errorf("%s ran on %s, not a GPU: a roofline needs a GPU's peaks", path, res.Device.Name)
	}
	source := "given"
	if peak.TFLOPs == 0 && peak.GBps == 0 {
		p, ok := peakOf(res.Device.Name)
		if !ok {
			return fmt.Errorf("%s ran on %q, whose peaks this program does not know: give -peak-tflops (dense fp16 tensor-core TFLOP/s) and -peak-gbps (memory GB/s) from its data sheet", path, res.Device.Name)
		}
		peak, source = p, "data sheet"
	} else if peak.TFLOPs <= 0 || peak.GBps <= 0 {
		return fmt.Errorf("give both -peak-tflops and -peak-gbps (> 0)")
	}
	if peak.Name == "" {
		peak.Name = res.Device.Name
	}
	// Forward rows of square, non-GQA shapes: viz's least-traffic intensity
	// (Q, K, V read, O written) is theirs.
	var rows []bench.Row
	for _, r := range res.Rows {
		if r.Direction == bench.DirFwd && r.Status == bench.StatusOK && r.TFLOPs > 0 && r.Nq == r.Nk && r.Hq == r.Hkv && (r.Impl == bench.ImplGPU || strings.HasPrefix(r.Impl, bench.ImplTorchPref)) {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s has no forward rows of GoFlash's GPU kernel or PyTorch to draw (run goflash bench with --direction fwd or both)", path)
	}
	ridge := peak.TFLOPs * 1e12 / (peak.GBps * 1e9)
	fmt.Fprintf(w, "%s: peak %.4g TFLOP/s fp16, %.4g GB/s (%s); ridge at %.0f FLOP/byte\n", res.Device.Name, peak.TFLOPs, peak.GBps, source, ridge)
	fmt.Fprintf(w, "%-26s %3s %6s %5s %3s %6s %9s %8s %10s\n", "implementation", "B", "N", "H", "D", "causal", "TFLOP/s", "of peak", "FLOP/byte")
	head := []string{"implementation", "B", "N", "H", "D", "causal", "TFLOP/s", "of peak", "FLOP/byte (least traffic)"}
	var cells [][]string
	for _, r := range rows {
		d := flashattn.Dims{B: r.B, Nq: r.Nq, Nk: r.Nk, Hq: r.Hq, Hkv: r.Hkv, D: r.D}
		x := d.FLOPs(r.Causal) / float64(2*(2*d.QShape().Numel()+2*d.KVShape().Numel()))
		c := []string{r.Impl, fmt.Sprint(r.B), fmt.Sprint(r.Nq), fmt.Sprint(r.Hq), fmt.Sprint(r.D), fmt.Sprint(r.Causal),
			fmt.Sprintf("%.1f", r.TFLOPs), fmt.Sprintf("%.0f%%", 100*r.TFLOPs/peak.TFLOPs), fmt.Sprintf("%.0f", x)}
		cells = append(cells, c)
		fmt.Fprintf(w, "%-26s %3s %6s %5s %3s %6s %9s %8s %10s\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8])
	}
	ch, err := viz.Roofline(viz.SpeedPoints(rows, nil), peak, viz.SpeedOptions{Title: "Forward passes on the roofline of " + res.Device.Name,
		Subtitle: fmt.Sprintf("goflash bench, %s; peaks: %s", path, source)})
	if err != nil {
		return err
	}
	if report == "" {
		return nil
	}
	rep := viz.NewReport("Roofline of "+res.Device.Name).
		AddText(fmt.Sprintf("Forward rows of %s on %s: peak %.4g TFLOP/s of fp16 tensor-core math and %.4g GB/s (%s), ridge at %.0f FLOP/byte. "+
			"Intensity counts the least traffic a call can have (Q, K, V read once, O written once, fp16); hover a point for its share of the roof.",
			path, res.Device.Name, peak.TFLOPs, peak.GBps, source, ridge)).
		AddChart(ch).
		AddTable(head, cells)
	if err := rep.WriteFile(report); err != nil {
		return err
	}
	fmt.Fprintln(w, "wrote", report)
	return nil
}
