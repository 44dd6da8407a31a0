package bench

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestCSVRoundTrip(t *testing.T) {
	for _, dtype := range []string{"fp16", "bf16"} {
		res := &Result{
			Meta:     Meta{Date: "2026-12-06T00:00:00Z", Commit: "0123456789abcdef"},
			Device:   DeviceMeta{Name: "GPU X", Capability: "9.0", Driver: "580"},
			Torch:    &TorchMeta{Device: "GPU X", Capability: "9.0", Driver: "580", DType: dtype, Status: StatusOK},
			Settings: Settings{DType: dtype},
			Rows: []Row{
				{Impl: ImplGPU, Direction: DirFwd, Shape: Shape{B: 2, Hq: 32, Hkv: 8, Nq: 8192, Nk: 4096, D: 128, Causal: true},
					Status: StatusOK, MS: 1.25, FLOPs: 3e12, TFLOPs: 600.5, ExtraBytes: 1 << 21, HostOverheadUS: 12.5, Kernel: "k"},
				{Impl: ImplTorchPref + "cudnn", Direction: DirBwd, Shape: Shape{B: 1, Hq: 4, Hkv: 4, Nq: 16, Nk: 16, D: 64},
					Status: StatusUnsupported, Reason: "no, \"quoted\", reason", Derived: true, GQA: "native"},
				{Impl: ImplGPU, Direction: DirDecode, Shape: Shape{B: 1, Hq: 32, Hkv: 8, Nq: 1, Nk: 1 << 17, D: 128},
					Status: StatusOK, MS: 0.18, TBps: 3.0},
				{Impl: ImplRungEdit, Direction: DirFwd, Shape: Shape{B: 4, Hq: 32, Hkv: 32, Nq: 4096, Nk: 4096, D: 64},
					Status: StatusOK, MS: 2.5, TFLOPs: 110.25, Kernel: "fa2_ladder4_d64", Registers: 96, SmemBytes: 24576, Occupancy: 0.375, ErrUsed: 0.21},
			},
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, res); err != nil {
			t.Fatal(err)
		}
		got, err := ParseCSV(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Rows, res.Rows) {
			t.Errorf("%s rows:\n got %+v\nwant %+v", dtype, got.Rows, res.Rows)
		}
		if got.Meta.Commit != res.Meta.Commit || got.Device.Name != "GPU X" || got.Settings.DType != dtype || got.Torch == nil || got.Torch.DType != dtype {
			t.Errorf("%s: meta %+v device %+v settings %+v torch %+v", dtype, got.Meta, got.Device, got.Settings, got.Torch)
		}
	}
}

// A file from before the dtype column: the kernels' names tell bf16 from fp16.
func TestCSVOlderColumns(t *testing.T) {
	head := strings.Join(CSVHeader[:24], ",")
	for _, c := range []struct{ kernel, want string }{{"fa2_fwd_sm80_d64", "fp16"}, {"fa2_fwd_sm80_d64_bf16", "bf16"}} {
		in := head + "\n2026-12-01T00:00:00Z,abc+dirty,GPU,8.0,580,goflash-gpu,fwd,1,2,2,64,64,64,false,ok,0.5,1,2,0,,false,," + c.kernel + ",\n"
		res, err := ParseCSV(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if res.Settings.DType != c.want || len(res.Rows) != 1 || res.Rows[0].Kernel != c.kernel {
			t.Errorf("kernel %s: dtype %q rows %+v, want %s", c.kernel, res.Settings.DType, res.Rows, c.want)
		}
	}
}

func TestCSVRefusals(t *testing.T) {
	for _, in := range []string{
		"",
		"date,impl\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,one,2,2,64,64,64,false,ok,,,,0,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,1,2,2,64,64,64,false,ok,x,,,0,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,1,2,2,64,64,64,false,ok,NaN,,,0,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,1,2,2,64,64,64,false,ok,1,,,1e30,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,1,2,2,64,64,64,false,ok,1,,,0.5,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,fwd,-1,2,2,64,64,64,false,ok,1,,,0,,false,,,,fp16,\n",
		strings.Join(CSVHeader, ",") + "\n2026,abc,GPU,8.0,580,goflash-gpu,decode,1000000000,2,1000000000,1,1000000000,1000000000,false,ok,1,,,0,,false,,,,fp16,\n",
	} {
		if res, err := ParseCSV(strings.NewReader(in)); err == nil {
			t.Errorf("ParseCSV(%q) = %+v, want an error", in, res)
		}
	}
}
