// Command vizshots draws every viz chart from real runs and saves a PNG of
// each (headless Chromium, network off) for the README and the tutorial:
//
//	go run ./viz/internal/cmd/vizshots -out docs/img -sdpa docs/img/data/sdpa-h200.json
//
// The attention, tiling and online-softmax charts come from flashattn runs
// made here. Speed and memory come from CPU runs made here and, with -sdpa,
// from a JSON file written by bench/sdpa.py on a GPU (its device, date and
// torch version go into the subtitles). Every page is loaded and checked
// (every chart drawn, no JavaScript error) before its screenshot is taken.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/goflash/goflash/bench"
	"github.com/goflash/goflash/viz"
	"github.com/goflash/goflash/viz/internal/browser"
	"github.com/goflash/goflash/viz/internal/gallery"
)

func main() {
	out := flag.String("out", "docs/img", "directory for the PNGs")
	sdpa := flag.String("sdpa", "", "bench/sdpa.py JSON output to draw GPU speed and memory from")
	bench := flag.String("bench", "", "with -sdpa: a goflash bench --compare-torch bench.json of the same GPU; the speed charts then draw its GoFlash and PyTorch rows (one run)")
	peakName := flag.String("peak-name", "", "GPU name for the roofline (default: the sdpa file's device)")
	peakTF := flag.Float64("peak-tflops", 0, "GPU dense fp16 tensor peak, TFLOP/s, for the roofline")
	peakBW := flag.Float64("peak-gbps", 0, "GPU memory bandwidth, GB/s, for the roofline")
	capacity := flag.Float64("capacity-gb", 16, "device capacity line on the memory chart, GB (0: none)")
	capLabel := flag.String("capacity-label", "T4: 16 GB", "label of the capacity line")
	report := flag.String("report", "", "also write every chart to this HTML report")
	flag.Parse()
	if err := run(*out, *sdpa, *bench, viz.GPUPeak{Name: *peakName, TFLOPs: *peakTF, GBps: *peakBW}, *capacity*1e9, *capLabel, *report); err != nil {
		fmt.Fprintln(os.Stderr, "vizshots:", err)
		os.Exit(1)
	}
}

// benchPoints returns the forward rows of a goflash bench.json, GoFlash's GPU
// kernels and PyTorch's SDPA backends timed in one run, at the shapes (B, N,
// H, D, causal) of the SDPA file's speed points.
func benchPoints(path, device string, sdpa []viz.SpeedPoint) ([]viz.SpeedPoint, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var f bench.Result
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, "", fmt.Errorf("%s: %v", path, err)
	}
	if f.Schema != bench.Schema {
		return nil, "", fmt.Errorf("%s: schema %q, want %s", path, f.Schema, bench.Schema)
	}
	if f.Device.Name != device {
		return nil, "", fmt.Errorf("%s ran on %q, the SDPA file on %q: draw runs of one GPU only", path, f.Device.Name, device)
	}
	want := map[string]bool{}
	for _, p := range sdpa {
		want[fmt.Sprint(p.B, p.N, p.H, p.D, p.Causal)] = true
	}
	pts := viz.SpeedPoints(f.Rows, func(r bench.Row) bool {
		return (r.Impl == bench.ImplGPU || strings.HasPrefix(r.Impl, bench.ImplTorchPref)) && r.Direction == bench.DirFwd &&
			r.Nq == r.Nk && r.Hq == r.Hkv && want[fmt.Sprint(r.B, r.Nq, r.Hq, r.D, r.Causal)]
	})
	if len(pts) == 0 {
		return nil, "", fmt.Errorf("%s: no forward rows at the SDPA file's shapes", path)
	}
	commit := f.Meta.Commit
	if len(commit) > 7 {
		commit = commit[:7]
	}
	torch := ""
	if f.Torch != nil {
		torch, _, _ = strings.Cut(f.Torch.Version, "+")
	}
	return pts, fmt.Sprintf("GoFlash %s vs PyTorch %s SDPA, one run, %s, %s", commit, torch, f.Device.Name, strings.SplitN(f.Meta.Date, "T", 2)[0]), nil
}

func run(out, sdpaPath, benchPath string, peak viz.GPUPeak, capacity float64, capLabel, reportPath string) error {
	chromium, err := browser.Find()
	if err != nil {
		return err
	}
	var d gallery.Data
	if sdpaPath == "" && benchPath != "" {
		return fmt.Errorf("-bench needs -sdpa (the PyTorch side of the same GPU)")
	}
	if sdpaPath == "" {
		// CPU only: this machine's naive and flash forward passes.
		sp, mp, err := gallery.MeasureCPU(1, 1, 64, []int{256, 512, 1024, 2048}, 3)
		if err != nil {
			return err
		}
		d = gallery.Data{Speed: sp, Mem: mp, Baseline: bench.SeriesCPUNaive, SpeedSubtitle: "CPU forward passes, B=1 H=1 D=64, this machine",
			MemOptions: viz.MemoryOptions{B: 1, H: 1, D: 64, ScoreHeads: 1}, Peak: peak}
		if peak.TFLOPs == 0 {
			return fmt.Errorf("without -sdpa, give -peak-tflops and -peak-gbps for the roofline")
		}
	} else {
		b, err := os.ReadFile(sdpaPath)
		if err != nil {
			return err
		}
		f, err := bench.ParseOutput(b)
		if err != nil {
			return fmt.Errorf("%s: %v", sdpaPath, err)
		}
		src := fmt.Sprintf("PyTorch %s SDPA on %s, %s", f.Torch, f.Device, strings.SplitN(f.Date, "T", 2)[0])
		if peak.Name == "" {
			peak.Name = f.Device
		}
		d = gallery.Data{Baseline: bench.SeriesSDPAMath, Peak: peak, SpeedSubtitle: src + ", fp16, 16k tokens per batch, H x D = 2048"}
		// Two sets of shapes: 16k tokens per batch (B*N = 16384, the FA2
		// paper's) for speed, one sequence (B = 1) growing for memory. A
		// shape in both is timed twice; the first run counts.
		memB, memH, memD := 0, 0, 0
		seen := map[string]bool{}
		for _, r := range f.Rows() {
			if r.Status != bench.StatusOK || r.Direction != bench.DirFwd || r.Nq != r.Nk || r.Hq != r.Hkv {
				continue
			}
			be := bench.SeriesName(r.Impl)
			if k := fmt.Sprint(be, r.B, r.Nq, r.Hq, r.D, r.Causal); !seen[k] {
				seen[k] = true
				if r.B*r.Nq == 16384 {
					d.Speed = append(d.Speed, viz.SpeedPointOf(r))
				}
				if r.B == 1 {
					d.Mem = append(d.Mem, viz.MemPoint{Backend: be, N: r.Nq, Bytes: float64(r.ExtraBytes)})
					memB, memH, memD = r.B, r.Hq, r.D
				}
			}
		}
		if benchPath != "" {
			pts, what, err := benchPoints(benchPath, f.Device, d.Speed)
			if err != nil {
				return err
			}
			d.Speed = pts
			d.SpeedSubtitle = what + "; fp16, B x N = 16384, H x D = 2048" + sweepOf(pts)
		}
		d.MemOptions = viz.MemoryOptions{B: memB, H: memH, D: memD, ElemBytes: 2, WithoutInputs: true, CapacityBytes: capacity, CapacityLabel: capLabel,
			Title: "Extra memory of one forward call", Subtitle: src}
		if peak.TFLOPs == 0 {
			return fmt.Errorf("give -peak-tflops and -peak-gbps (data sheet of %s) for the roofline", f.Device)
		}
	}
	items, err := gallery.Build(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "vizshots")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx := context.Background()
	for _, it := range items {
		page, height, err := barePage(it.Chart)
		if err != nil {
			return fmt.Errorf("%s: %v", it.Name, err)
		}
		dir := filepath.Join(tmp, it.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		res, err := browser.Load(ctx, chromium, page, dir)
		if err != nil {
			return fmt.Errorf("%s: %v", it.Name, err)
		}
		if len(res.Errors) > 0 || res.Instances != 1 || len(res.Charts) != 1 || res.Charts[0].Ink == 0 {
			return fmt.Errorf("%s did not draw: %d instances, errors %q", it.Name, res.Instances, res.Errors)
		}
		png := filepath.Join(out, it.Name+".png")
		if err := browser.Screenshot(ctx, chromium, filepath.Join(dir, "page.html"), png, 900, height); err != nil {
			return fmt.Errorf("%s: %v", it.Name, err)
		}
		fmt.Println(png)
	}
	if reportPath != "" {
		r := viz.NewReport("GoFlash charts")
		for _, it := range items {
			r.AddHeading(it.Name).AddChart(it.Chart)
		}
		if err := r.WriteFile(reportPath); err != nil {
			return err
		}
		fmt.Println(reportPath)
	}
	return nil
}

var heightPx = regexp.MustCompile(`height:(\d+)px`)

// barePage is a page holding just the chart, flush with the window, and the
// chart's height in pixels.
func barePage(c viz.Chart) ([]byte, int, error) {
	frag, err := viz.Fragment("shot_", c)
	if err != nil {
		return nil, 0, err
	}
	h := 500
	if m := heightPx.FindStringSubmatch(frag); m != nil {
		h, _ = strconv.Atoi(m[1])
	}
	page := "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<style>body{margin:0;background:#fff}.goflash-chart{margin:0}</style>\n" +
		viz.LibraryScript() + "</head>\n<body>\n" + frag + "</body>\n</html>\n"
	return []byte(page), h, nil
}

// sweepOf names the head dim and mask when every point shares them.
func sweepOf(pts []viz.SpeedPoint) string {
	for _, p := range pts {
		if p.D != pts[0].D || p.Causal != pts[0].Causal {
			return ""
		}
	}
	mask := "not causal"
	if pts[0].Causal {
		mask = "causal"
	}
	return fmt.Sprintf(", D = %d, %s", pts[0].D, mask)
}
