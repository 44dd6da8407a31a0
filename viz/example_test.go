package viz_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/viz"
)

// One head's attention weights, computed from q and k, with the tokens on
// both axes.
func ExampleAttentionHeatmap() {
	tokens := []string{"the", "cat", "sat", "on", "the", "mat"}
	q := flashattn.Random(flashattn.Shape{B: 1, N: len(tokens), H: 2, D: 16}, 1)
	k := flashattn.Random(flashattn.Shape{B: 1, N: len(tokens), H: 2, D: 16}, 2)
	w, err := viz.AttentionWeights(q, k, 0, 1, &flashattn.Options{Causal: true})
	if err != nil {
		log.Fatal(err)
	}
	c, err := viz.AttentionHeatmap(w, tokens, tokens, "head 1")
	if err != nil {
		log.Fatal(err)
	}
	// A go-echarts chart: add options the go-echarts way.
	c.SetGlobalOptions(charts.WithTitleOpts(opts.Title{Title: "Causal attention, head 1"}))
	fmt.Printf("row 0 attends only to itself: %.2f\n", w[0][0])
	fmt.Printf("%s ... %d cells\n", c.Title.Title, len(w)*len(w[0]))
	// Output:
	// row 0 attends only to itself: 1.00
	// Causal attention, head 1 ... 36 cells
}

// Several heads side by side, on one colour scale.
func ExampleAttentionHeads() {
	tokens := []string{"a", "b", "c", "d"}
	s := flashattn.Shape{B: 1, N: len(tokens), H: 4, D: 8}
	q, k := flashattn.Random(s, 1), flashattn.Random(s, 2)
	var heads [][][]float64
	for h := 0; h < s.H; h++ {
		w, err := viz.AttentionWeights(q, k, 0, h, nil)
		if err != nil {
			log.Fatal(err)
		}
		heads = append(heads, w)
	}
	c, err := viz.AttentionHeads(heads, tokens, tokens, 2, "4 heads")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(c.MultiSeries), "heatmaps in", len(c.GridList), "grids")
	// Output: 4 heatmaps in 4 grids
}

// The tiling schedule of a causal forward pass, from its trace.
func ExampleTiling() {
	s := flashattn.Shape{B: 1, N: 128, H: 1, D: 32}
	q, k, v := flashattn.Random(s, 1), flashattn.Random(s, 2), flashattn.Random(s, 3)
	var tr flashattn.Trace
	_, err := flashattn.Forward(q, k, v, &flashattn.Options{Backend: flashattn.CPUFlash, Causal: true, BlockQ: 32, BlockK: 32, Trace: &tr})
	if err != nil {
		log.Fatal(err)
	}
	c, err := viz.Tiling(&tr)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range c.MultiSeries {
		fmt.Printf("%s: %d\n", s.Name, len(s.Data.([]opts.HeatMapData)))
	}
	// Output:
	// computed: 6
	// masked (on the diagonal): 4
	// skipped (above the diagonal): 6
}

// The running max and sum of one row, step by step, against the exact ones.
func ExampleOnlineSoftmax() {
	s := flashattn.Shape{B: 1, N: 100, H: 1, D: 16}
	q, k, v := flashattn.Random(s, 1), flashattn.Random(s, 2), flashattn.Random(s, 3)
	tr := flashattn.Trace{Row: 99}
	o := &flashattn.Options{Backend: flashattn.CPUFlash, BlockQ: 25, BlockK: 25, Trace: &tr}
	if _, err := flashattn.Forward(q, k, v, o); err != nil {
		log.Fatal(err)
	}
	scores, err := viz.TracedRow(q, k, &tr, o)
	if err != nil {
		log.Fatal(err)
	}
	c, err := viz.OnlineSoftmax(&tr, viz.SoftmaxReference{Scores: scores})
	if err != nil {
		log.Fatal(err)
	}
	exact := viz.RowStatsOf(scores)
	fmt.Printf("%d K blocks; final m matches: %v\n", len(tr.RowSteps), fmt.Sprintf("%.5f", tr.M) == fmt.Sprintf("%.5f", exact.Max))
	fmt.Println(len(c.MultiSeries), "series")
	// Output:
	// 4 K blocks; final m matches: true
	// 7 series
}

// Memory of naive and flash attention against N, with a T4's capacity.
func ExampleMemory() {
	c, err := viz.Memory(nil, viz.MemoryOptions{
		B: 1, H: 32, D: 128, ElemBytes: 2, // fp16, S and P of all 32 heads at once
		CapacityBytes: 16e9, CapacityLabel: "T4: 16 GB",
	})
	if err != nil {
		log.Fatal(err)
	}
	naive, flash := viz.AttentionBytes(flashattn.Dims{B: 1, Nq: 16384, Nk: 16384, Hq: 32, Hkv: 32, D: 128}, 2, 32)
	fmt.Printf("N=16384: naive %.1f GB, flash %.3f GB\n", naive/1e9, flash/1e9)
	for _, s := range c.MultiSeries {
		fmt.Println(s.Name)
	}
	// Output:
	// N=16384: naive 34.9 GB, flash 0.539 GB
	// naive (formula)
	// flash (formula)
	// T4: 16 GB
}

// TFLOP/s against N for several backends; TFLOPs is computed from the time
// when left zero.
func ExampleSpeed() {
	points := []viz.SpeedPoint{
		{Backend: bench.SeriesCPUNaive, B: 1, H: 8, N: 1024, D: 64, Millis: 250},
		{Backend: bench.SeriesCPUFlash, B: 1, H: 8, N: 1024, D: 64, Millis: 200},
		{Backend: bench.SeriesCPUNaive, B: 1, H: 8, N: 2048, D: 64, Millis: 1100},
		{Backend: bench.SeriesCPUFlash, B: 1, H: 8, N: 2048, D: 64, Millis: 800},
	}
	c, err := viz.Speed(points, viz.SpeedOptions{Subtitle: "example numbers"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(c.MultiSeries), "backends")
	// Output: 2 backends
}

// How many times faster than a baseline, shape by shape.
func ExampleSpeedup() {
	points := []viz.SpeedPoint{
		{Backend: bench.SeriesCPUNaive, B: 1, H: 8, N: 1024, D: 64, Millis: 250},
		{Backend: bench.SeriesCPUFlash, B: 1, H: 8, N: 1024, D: 64, Millis: 200},
	}
	c, err := viz.Speedup(points, bench.SeriesCPUNaive, viz.SpeedOptions{})
	if err != nil {
		log.Fatal(err)
	}
	p := c.MultiSeries[0].Data.([]opts.LineData)[0].Value.([3]any)
	fmt.Printf("%s at N=%v: %.2fx\n", c.MultiSeries[0].Name, p[0], p[1])
	// Output: cpu-flash at N=1024: 1.25x
}

// Points under a GPU's roofline; peak and bandwidth come from the caller
// (here a T4's data sheet: 65 TFLOP/s fp16, 320 GB/s).
func ExampleRoofline() {
	points := []viz.SpeedPoint{{Backend: bench.SeriesGPUFlash, N: 4096, D: 64, TFLOPs: 20}}
	c, err := viz.Roofline(points, viz.GPUPeak{Name: "T4", TFLOPs: 65, GBps: 320}, viz.SpeedOptions{Subtitle: "example point"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Title.Subtitle)
	// Output:
	// example point
	// T4: peak 65 TFLOP/s, 320 GB/s, ridge at 203 FLOP/byte; intensity: least traffic (Q, K, V in, O out, fp16)
}

// A whole report in one self-contained HTML file.
func ExampleReport() {
	c, err := viz.Memory(nil, viz.MemoryOptions{B: 1, H: 8, D: 64})
	if err != nil {
		log.Fatal(err)
	}
	r := viz.NewReport("GoFlash report").
		AddHeading("Memory").
		AddText("Naive attention stores N x N scores per head; flash attention does not.").
		AddChart(c).
		AddTable([]string{"backend", "ms"}, [][]string{{"cpu-flash", "12.5"}})
	path := filepath.Join(os.TempDir(), "goflash-example-report.html")
	if err := r.WriteFile(path); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)
	fmt.Println(r.Charts(), "chart")
	// Output: 1 chart
}
