package main

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/goflash/goflash/bench"
)

// The result model is package bench's; these short names keep this
// package's code readable.
type (
	Row         = bench.Row
	DeviceMeta  = bench.DeviceMeta
	TorchMeta   = bench.TorchMeta
	Settings    = bench.Settings
	BenchResult = bench.Result
	TableLine   = bench.TableLine
	Cell        = bench.Cell
)

const (
	implGPU       = bench.ImplGPU
	implGPUSM75   = bench.ImplGPUSM75
	implGPUSM80   = bench.ImplGPUSM80
	implGPUDet    = bench.ImplGPUDet
	implGPUMod    = bench.ImplGPUMod
	implCPUFlash  = bench.ImplCPUFlash
	implCPUNaive  = bench.ImplCPUNaive
	implTorchPref = bench.ImplTorchPref

	dirFwd    = bench.DirFwd
	dirBwd    = bench.DirBwd
	dirFwdBwd = bench.DirFwdBwd

	statusOK          = bench.StatusOK
	statusSkipped     = bench.StatusSkipped
	statusUnsupported = bench.StatusUnsupported
	statusOOM         = bench.StatusOOM
	statusError       = bench.StatusError

	benchSchema = bench.Schema
)

func caseOf(r Row) Case { return Case{Dims: r.Dims(), Causal: r.Causal} }

var csvHeader = []string{"date", "commit", "device", "capability", "driver", "impl", "direction",
	"b", "hq", "hkv", "nq", "nk", "d", "causal", "status", "ms", "tflops", "flops",
	"extra_bytes", "host_overhead_us", "derived", "gqa", "kernel", "reason", "dtype", "tb_per_s"}

// writeCSV writes one line per row; the device, driver, commit and date are
// repeated on every line so that a line means something on its own.
func writeCSV(w io.Writer, res *BenchResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	for _, r := range res.Rows {
		dev, capab, drv, dtype := res.Device.Name, res.Device.Capability, res.Device.Driver, res.Settings.DType
		if strings.HasPrefix(r.Impl, implTorchPref) && res.Torch != nil {
			dev, capab, drv, dtype = res.Torch.Device, res.Torch.Capability, res.Torch.Driver, orDefault(res.Torch.DType, "fp16")
		}
		rec := []string{res.Meta.Date, res.Meta.Commit, dev, capab, drv, r.Impl, r.Direction,
			strconv.Itoa(r.B), strconv.Itoa(r.Hq), strconv.Itoa(r.Hkv), strconv.Itoa(r.Nq), strconv.Itoa(r.Nk), strconv.Itoa(r.D),
			strconv.FormatBool(r.Causal), r.Status, f(r.MS), f(r.TFLOPs), f(r.FLOPs),
			strconv.FormatInt(r.ExtraBytes, 10), f(r.HostOverheadUS), strconv.FormatBool(r.Derived), r.GQA, r.Kernel, r.Reason, dtype, f(r.TBps)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFiles writes bench.json, bench.csv and bench.md into dir, each
// atomically (a failed write leaves the old file whole), and returns their
// paths.
func writeFiles(dir string, res *BenchResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		if err := writeFileAtomic(p, fn); err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}
	if err := write("bench.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(res)
	}); err != nil {
		return nil, err
	}
	if err := write("bench.csv", func(w io.Writer) error { return writeCSV(w, res) }); err != nil {
		return nil, err
	}
	if err := write("bench.md", func(w io.Writer) error { return writeMarkdown(w, res) }); err != nil {
		return nil, err
	}
	return paths, nil
}
