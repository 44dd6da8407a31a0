package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"

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
	if err := write("bench.csv", func(w io.Writer) error { return bench.WriteCSV(w, res) }); err != nil {
		return nil, err
	}
	if err := write("bench.md", func(w io.Writer) error { return writeMarkdown(w, res) }); err != nil {
		return nil, err
	}
	return paths, nil
}
