// Package gallery builds one of every viz chart from real flashattn runs:
// the page the browser test loads and the screenshot tool photographs.
package gallery

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/viz"
)

// Item is one chart and the file name of its screenshot.
type Item struct {
	Name  string // file name without extension, e.g. "tiling"
	Chart viz.Chart
}

// Data is what the speed and memory charts draw; the rest is computed here.
type Data struct {
	Speed         []viz.SpeedPoint
	SpeedSubtitle string
	Baseline      string // backend the speedup chart divides by
	Peak          viz.GPUPeak
	Mem           []viz.MemPoint
	MemOptions    viz.MemoryOptions
}

// Sentence is the token sequence of the attention heatmaps.
var Sentence = strings.Fields("the cat sat on the mat because the cat was tired .")

// TokenQK returns q and k (1, len(tokens), heads, d) in which a query and a
// key of the same word point the same way, each head weighting the words
// differently: the heatmaps then show structure rather than noise.
func TokenQK(tokens []string, heads, d int, seed uint64) (q, k *flashattn.Tensor) {
	r := rand.New(rand.NewPCG(seed, 1))
	emb := map[string][]float64{}
	for _, t := range tokens {
		if emb[t] == nil {
			v := make([]float64, d)
			for i := range v {
				v[i] = r.NormFloat64()
			}
			emb[t] = v
		}
	}
	s := flashattn.Shape{B: 1, N: len(tokens), H: heads, D: d}
	q, k = flashattn.New(s), flashattn.New(s)
	for h := 0; h < heads; h++ {
		gain := 0.6 + 0.5*float64(h) // sharper heads further on
		for n, t := range tokens {
			for x := 0; x < d; x++ {
				q.Set(0, n, h, x, float32(gain*emb[t][x]+0.4*r.NormFloat64()))
				k.Set(0, n, h, x, float32(emb[t][x]+0.4*r.NormFloat64()))
			}
		}
	}
	return q, k
}

// TracedForward runs a causal CPUFlash forward pass with 32 x 32 tiles on
// random inputs (1, n, 1, 32) and traces row.
func TracedForward(n, row int, seed uint64) (*flashattn.Trace, viz.SoftmaxReference, error) {
	s := flashattn.Shape{B: 1, N: n, H: 1, D: 32}
	q, k, v := flashattn.Random(s, seed), flashattn.Random(s, seed+1), flashattn.Random(s, seed+2)
	tr := &flashattn.Trace{Row: row}
	o := &flashattn.Options{Backend: flashattn.CPUFlash, Causal: true, BlockQ: 32, BlockK: 32, Trace: tr}
	if _, err := flashattn.Forward(q, k, v, o); err != nil {
		return nil, viz.SoftmaxReference{}, err
	}
	scores, err := viz.TracedRow(q, k, tr, o)
	if err != nil {
		return nil, viz.SoftmaxReference{}, err
	}
	return tr, viz.SoftmaxReference{Scores: scores}, nil
}

// Build makes every chart, in the order of the docs.
func Build(d Data) ([]Item, error) {
	var items []Item
	add := func(name string, c viz.Chart, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		items = append(items, Item{name, c})
		return nil
	}
	q, k := TokenQK(Sentence, 4, 16, 7)
	o := &flashattn.Options{Causal: true}
	var heads [][][]float64
	for h := 0; h < 4; h++ {
		w, err := viz.AttentionWeights(q, k, 0, h, o)
		if err != nil {
			return nil, err
		}
		heads = append(heads, w)
	}
	c1, err := viz.AttentionHeatmap(heads[2], Sentence, Sentence, "Causal attention weights, head 2")
	if err := add("attention-heatmap", c1, err); err != nil {
		return nil, err
	}
	c2, err := viz.AttentionHeads(heads, Sentence, Sentence, 2, "Causal attention weights, 4 heads")
	if err := add("attention-heads", c2, err); err != nil {
		return nil, err
	}
	tr, ref, err := TracedForward(256, 200, 11)
	if err != nil {
		return nil, err
	}
	c3, err := viz.Tiling(tr)
	if err := add("tiling", c3, err); err != nil {
		return nil, err
	}
	c4, err := viz.OnlineSoftmax(tr, ref)
	if err := add("online-softmax", c4, err); err != nil {
		return nil, err
	}
	c5, err := viz.Memory(d.Mem, d.MemOptions)
	if err := add("memory", c5, err); err != nil {
		return nil, err
	}
	c6, err := viz.Speed(d.Speed, viz.SpeedOptions{Subtitle: d.SpeedSubtitle})
	if err := add("speed", c6, err); err != nil {
		return nil, err
	}
	c7, err := viz.Speedup(d.Speed, d.Baseline, viz.SpeedOptions{Subtitle: d.SpeedSubtitle})
	if err := add("speedup", c7, err); err != nil {
		return nil, err
	}
	var gpu []viz.SpeedPoint
	for _, p := range d.Speed {
		if !strings.HasPrefix(p.Backend, "cpu") {
			gpu = append(gpu, p)
		}
	}
	if len(gpu) == 0 {
		gpu = d.Speed
	}
	c8, err := viz.Roofline(gpu, d.Peak, viz.SpeedOptions{Subtitle: d.SpeedSubtitle})
	if err := add("roofline", c8, err); err != nil {
		return nil, err
	}
	return items, nil
}

// MeasureCPU times CPUNaive and CPUFlash forward passes at (b, n, h, d) for
// every n (median of reps calls) and counts the Go heap each call allocates,
// which for naive attention is dominated by its S and P matrices.
func MeasureCPU(b, h, d int, ns []int, reps int) ([]viz.SpeedPoint, []viz.MemPoint, error) {
	var sp []viz.SpeedPoint
	var mp []viz.MemPoint
	for _, n := range ns {
		s := flashattn.Shape{B: b, N: n, H: h, D: d}
		q, k, v := flashattn.Random(s, 1), flashattn.Random(s, 2), flashattn.Random(s, 3)
		for _, be := range []flashattn.Backend{flashattn.CPUNaive, flashattn.CPUFlash} {
			o := &flashattn.Options{Backend: be}
			var times []float64
			var alloc uint64
			for r := 0; r < reps; r++ {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				t0 := time.Now()
				if _, err := flashattn.Forward(q, k, v, o); err != nil {
					return nil, nil, err
				}
				times = append(times, float64(time.Since(t0).Nanoseconds())/1e6)
				runtime.ReadMemStats(&m1)
				alloc = m1.TotalAlloc - m0.TotalAlloc
			}
			sort.Float64s(times)
			sp = append(sp, viz.SpeedPoint{Backend: be.String(), B: b, N: n, H: h, D: d, Millis: times[len(times)/2]})
			mp = append(mp, viz.MemPoint{Backend: be.String(), N: n, Bytes: float64(alloc)})
		}
	}
	return sp, mp, nil
}
