package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// CSVHeader names the columns of bench.csv, in order. Columns are only ever
// added at the end, so that older files keep their places; ReadCSV reads by
// name and leaves a column an older file lacks at its zero value.
var CSVHeader = []string{"date", "commit", "device", "capability", "driver", "impl", "direction",
	"b", "hq", "hkv", "nq", "nk", "d", "causal", "status", "ms", "tflops", "flops",
	"extra_bytes", "host_overhead_us", "derived", "gqa", "kernel", "reason", "dtype", "tb_per_s",
	"registers", "smem_bytes", "occupancy", "err_used"}

// WriteCSV writes one line per row of res; the device, driver, commit and
// date are repeated on every line so that a line means something on its own.
func WriteCSV(w io.Writer, res *Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	f := func(x float64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	i := func(x int) string {
		if x == 0 {
			return ""
		}
		return strconv.Itoa(x)
	}
	for _, r := range res.Rows {
		dev, capab, drv, dtype := res.Device.Name, res.Device.Capability, res.Device.Driver, res.Settings.DType
		if strings.HasPrefix(r.Impl, ImplTorchPref) && res.Torch != nil {
			dev, capab, drv, dtype = res.Torch.Device, res.Torch.Capability, res.Torch.Driver, res.Torch.DType
			if dtype == "" {
				dtype = "fp16"
			}
		}
		rec := []string{res.Meta.Date, res.Meta.Commit, dev, capab, drv, r.Impl, r.Direction,
			strconv.Itoa(r.B), strconv.Itoa(r.Hq), strconv.Itoa(r.Hkv), strconv.Itoa(r.Nq), strconv.Itoa(r.Nk), strconv.Itoa(r.D),
			strconv.FormatBool(r.Causal), r.Status, f(r.MS), f(r.TFLOPs), f(r.FLOPs),
			strconv.FormatInt(r.ExtraBytes, 10), f(r.HostOverheadUS), strconv.FormatBool(r.Derived), r.GQA, r.Kernel, r.Reason, dtype, f(r.TBps),
			i(r.Registers), i(r.SmemBytes), f(r.Occupancy), f(r.ErrUsed)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads a bench.csv that WriteCSV wrote (or an older one with fewer
// columns). The Result has the rows, Meta's date and commit, the GoFlash
// device's name, capability and driver, the PyTorch side's device and dtype
// when torch rows are present, and Settings.DType; what the CSV does not
// carry (settings, notes, the host's description) is left empty.
func ReadCSV(path string) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := ParseCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// ParseCSV is ReadCSV from a reader.
func ParseCSV(r io.Reader) (*Result, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("empty CSV")
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	for _, need := range []string{"commit", "impl", "direction", "b", "hq", "hkv", "nq", "nk", "d", "causal", "status"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("no %q column", need)
		}
	}
	res := &Result{Schema: Schema}
	for n, rec := range recs[1:] {
		line := n + 2
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return rec[i]
			}
			return ""
		}
		var perr error
		atoi := func(name string) int {
			s := get(name)
			if s == "" {
				return 0
			}
			v, err := strconv.Atoi(s)
			if err != nil && perr == nil {
				perr = fmt.Errorf("line %d: %s: %v", line, name, err)
			}
			return v
		}
		atof := func(name string) float64 {
			s := get(name)
			if s == "" {
				return 0
			}
			v, err := strconv.ParseFloat(s, 64)
			if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
				err = fmt.Errorf("%q is not finite", s)
			}
			if err != nil && perr == nil {
				perr = fmt.Errorf("line %d: %s: %v", line, name, err)
			}
			return v
		}
		atoi64 := func(name string) int64 { // an integer, or an integral float within int64 (1e+06)
			s := get(name)
			if s == "" {
				return 0
			}
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				f, ferr := strconv.ParseFloat(s, 64)
				if ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
					return int64(f)
				}
				if perr == nil {
					perr = fmt.Errorf("line %d: %s: %q is not an integer within int64", line, name, s)
				}
			}
			return v
		}
		row := Row{
			Impl: get("impl"), Direction: get("direction"),
			Shape:  Shape{B: atoi("b"), Hq: atoi("hq"), Hkv: atoi("hkv"), Nq: atoi("nq"), Nk: atoi("nk"), D: atoi("d"), Causal: get("causal") == "true"},
			Status: get("status"), Reason: get("reason"),
			MS: atof("ms"), FLOPs: atof("flops"), TFLOPs: atof("tflops"),
			ExtraBytes: atoi64("extra_bytes"), HostOverheadUS: atof("host_overhead_us"),
			Derived: get("derived") == "true", GQA: get("gqa"), Kernel: get("kernel"), TBps: atof("tb_per_s"),
			Registers: atoi("registers"), SmemBytes: atoi("smem_bytes"), Occupancy: atof("occupancy"), ErrUsed: atof("err_used"),
		}
		if perr == nil {
			if err := row.Shape.check(); err != nil {
				perr = fmt.Errorf("line %d: %v", line, err)
			}
		}
		if perr != nil {
			return nil, perr
		}
		if res.Meta.Commit == "" {
			res.Meta.Date, res.Meta.Commit = get("date"), get("commit")
		}
		if strings.HasPrefix(row.Impl, ImplTorchPref) {
			if res.Torch == nil {
				res.Torch = &TorchMeta{Device: get("device"), Capability: get("capability"), Driver: get("driver"), DType: get("dtype"), Status: StatusOK}
			}
		} else if res.Device.Name == "" {
			res.Device = DeviceMeta{Name: get("device"), Capability: get("capability"), Driver: get("driver")}
			res.Settings.DType = get("dtype")
		}
		res.Rows = append(res.Rows, row)
	}
	if _, ok := col["dtype"]; !ok { // a file from before the column: the kernels' names tell
		res.Settings.DType = "fp16"
		for _, r := range res.Rows {
			if strings.HasSuffix(r.Kernel, "_bf16") {
				res.Settings.DType = "bf16"
			}
		}
		if res.Torch != nil {
			res.Torch.DType = res.Settings.DType
		}
	}
	return res, nil
}
