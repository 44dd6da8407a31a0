package flashattn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// symbols are the kernels' symbols, in order.
func symbols[K flashattn.KernelInfo | flashattn.KernelStats](ks []K) []string {
	var out []string
	for _, k := range ks {
		switch k := any(k).(type) {
		case flashattn.KernelInfo:
			out = append(out, k.Symbol)
		case flashattn.KernelStats:
			out = append(out, k.Symbol)
		}
	}
	return out
}

// TestGPUKernelsByOp: Kernels names, for every op, the kernels its call
// runs, loaded, with their stats on the device: what the deprecated
// queries and the raw plans say, for every head dim SupportedHeadDims
// lists, and an *UnsupportedError for one it does not.
func TestGPUKernelsByOp(t *testing.T) {
	dev := openGPU(t)
	dims := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 2, Hkv: 2, D: 64}
	causal := &flashattn.Options{Causal: true}
	kernels := func(op flashattn.Op, dims flashattn.Dims, dt flashattn.DType, o *flashattn.Options) []flashattn.KernelStats {
		t.Helper()
		ks, err := dev.Kernels(op, dims, dt, o)
		if err != nil {
			t.Fatalf("Kernels(%v, %+v, %v): %v", op, dims, dt, err)
		}
		for _, k := range ks {
			if !k.Loaded || k.Registers == 0 || k.BlocksPerSM < 1 || k.Occupancy <= 0 || k.NVRTC || k.DType != dt {
				t.Errorf("%v: kernel %v: %+v", op, k.Symbol, k)
			}
		}
		return ks
	}
	fwd, bwd := kernels(flashattn.OpForward, dims, flashattn.FP16, causal), kernels(flashattn.OpBackward, dims, flashattn.FP16, causal)
	if len(fwd) != 1 || !fwd[0].Causal || len(bwd) != 3 || bwd[0].Pass != "bwd_pre" {
		t.Fatalf("forward %v, backward %v", symbols(fwd), symbols(bwd))
	}
	if old, err := dev.Kernel(dims, true); err != nil || old.Symbol != fwd[0].Symbol {
		t.Errorf("Kernel: %v, %v; Kernels: %v", old.Symbol, err, fwd[0].Symbol)
	}
	if old, err := dev.BackwardKernels(dims, true); err != nil || !slices.Equal(symbols(old), symbols(bwd)) {
		t.Errorf("BackwardKernels: %v, %v; Kernels: %v", symbols(old), err, symbols(bwd))
	}
	det := kernels(flashattn.OpBackward, dims, flashattn.FP16, &flashattn.Options{Causal: true, Deterministic: true})
	if old, err := dev.BackwardKernelsDeterministic(dims, true); err != nil || !slices.Equal(symbols(old), symbols(det)) {
		t.Errorf("BackwardKernelsDeterministic: %v, %v; Kernels: %v", symbols(old), err, symbols(det))
	}
	if step := kernels(flashattn.OpForwardBackward, dims, flashattn.FP16, causal); !slices.Equal(symbols(step), append(symbols(fwd), symbols(bwd)...)) {
		t.Errorf("forward+backward %v, want %v then %v", symbols(step), symbols(fwd), symbols(bwd))
	}
	if vf := kernels(flashattn.OpVarlenForward, dims, flashattn.FP16, causal); len(vf) != 1 || vf[0].Pass != "fwd_varlen" {
		t.Errorf("varlen forward %v", symbols(vf))
	}
	if vb := kernels(flashattn.OpVarlenBackward, dims, flashattn.FP16, causal); len(vb) != 3 || vb[0].Pass != "bwd_pre_varlen" {
		t.Errorf("varlen backward %v", symbols(vb))
	}
	decode := flashattn.Dims{B: 2, Nq: 1, Nk: 1024, Hq: 8, Hkv: 2, D: 64}
	if kv := kernels(flashattn.OpKVCache, decode, flashattn.FP16, nil); len(kv) != 1 || kv[0].Pass != "decode" {
		t.Errorf("decode %v", symbols(kv))
	}
	rf, err := dev.NewRawForward(dims, flashattn.FP16, causal)
	if err != nil {
		t.Fatal(err)
	}
	if raw := kernels(flashattn.OpRawForward, dims, flashattn.FP16, causal); len(raw) != 1 || raw[0].Symbol != rf.Kernel().Symbol {
		t.Errorf("raw forward %v, the plan runs %v", symbols(raw), rf.Kernel().Symbol)
	}
	if hd := dev.SupportedHeadDims(flashattn.OpRawBackward, flashattn.FP16, nil); slices.Contains(hd, dims.D) {
		rb, err := dev.NewRawBackward(dims, flashattn.FP16, causal)
		if err != nil {
			t.Fatal(err)
		}
		if raw := kernels(flashattn.OpRawBackward, dims, flashattn.FP16, causal); !slices.Equal(symbols(raw), symbols(rb.Kernels())) {
			t.Errorf("raw backward %v, the plan runs %v", symbols(raw), symbols(rb.Kernels()))
		}
	}
	var ue *flashattn.UnsupportedError
	if _, err := dev.Kernels(flashattn.OpRawForward, dims, flashattn.FP16, &flashattn.Options{Softcap: 30}); !errors.As(err, &ue) {
		t.Errorf("raw forward with a softcap: %v, want an *UnsupportedError", err)
	}
	// Every head dim listed runs; one that is not is refused.
	for _, op := range []flashattn.Op{flashattn.OpForward, flashattn.OpBackward, flashattn.OpForwardBackward, flashattn.OpVarlenForward,
		flashattn.OpVarlenBackward, flashattn.OpKVCache, flashattn.OpRawForward, flashattn.OpRawBackward} {
		for _, dt := range []flashattn.DType{flashattn.FP16, flashattn.BF16} {
			hds := dev.SupportedHeadDims(op, dt, nil)
			if dt == flashattn.BF16 && dev.Info().Arch() < 80 {
				if hds != nil {
					t.Errorf("%v bf16 on sm_%d: %v", op, dev.Info().Arch(), hds)
				}
				if _, err := dev.Kernels(op, dims, dt, nil); !errors.As(err, &ue) {
					t.Errorf("%v bf16 on sm_%d: %v, want an *UnsupportedError", op, dev.Info().Arch(), err)
				}
				continue
			}
			if len(hds) == 0 {
				t.Errorf("%v %v: no head dims", op, dt)
			}
			for _, hd := range hds {
				d := dims
				d.D = hd
				kernels(op, d, dt, nil)
			}
			d := dims
			d.D = 40
			if _, err := dev.Kernels(op, d, dt, nil); !errors.As(err, &ue) {
				t.Errorf("%v %v at D 40: %v, want an *UnsupportedError", op, dt, err)
			}
		}
	}
}

// TestGPUBenchByOp: Bench times every op it takes, the varlen ops' rate
// on the real tokens and decode's bandwidth (bf16 too where the path has
// it, paged and not), and the deprecated twins still answer.
func TestGPUBenchByOp(t *testing.T) {
	dev := openGPU(t)
	dims := flashattn.Dims{B: 2, Nq: 256, Nk: 256, Hq: 2, Hkv: 2, D: 64}
	packed := flashattn.Dims{B: 1, Nq: 256, Nk: 256, Hq: 2, Hkv: 2, D: 64}
	vl := flashattn.Varlen{CuSeqlensQ: []int{0, 64, 256}, CuSeqlensK: []int{0, 64, 256}}
	decode := flashattn.Dims{B: 2, Nq: 1, Nk: 1024, Hq: 8, Hkv: 2, D: 64}
	dts := []flashattn.DType{flashattn.FP16}
	if dev.Info().Arch() >= 80 {
		dts = append(dts, flashattn.BF16)
	}
	for _, dt := range dts {
		for _, c := range []struct {
			op   flashattn.Op
			dims flashattn.Dims
			cfg  flashattn.BenchConfig
		}{
			{flashattn.OpForward, dims, flashattn.BenchConfig{Warmup: 1, Reps: 2}},
			{flashattn.OpBackward, dims, flashattn.BenchConfig{Warmup: 1, Reps: 2}},
			{flashattn.OpForwardBackward, dims, flashattn.BenchConfig{Warmup: 1, Reps: 2}},
			{flashattn.OpVarlenForward, packed, flashattn.BenchConfig{Warmup: 1, Reps: 2, Varlen: vl}},
			{flashattn.OpVarlenBackward, packed, flashattn.BenchConfig{Warmup: 1, Reps: 2, Varlen: vl}},
			{flashattn.OpKVCache, decode, flashattn.BenchConfig{Warmup: 1, Reps: 2}},
			{flashattn.OpKVCache, decode, flashattn.BenchConfig{Warmup: 1, Reps: 2, PageSize: 64}},
		} {
			r, err := dev.Bench(c.op, c.dims, dt, &flashattn.Options{Causal: true}, c.cfg)
			if err != nil {
				t.Fatalf("Bench(%v, %v, %+v): %v", c.op, dt, c.cfg, err)
			}
			if r.Reps != 2 || r.MedianMs <= 0 || r.TFLOPS <= 0 || r.PeakTFLOPS < r.TFLOPS || len(r.Kernels) == 0 || r.Kernel.DType != dt {
				t.Errorf("%v %v: %+v", c.op, dt, r)
			}
			switch c.op {
			case flashattn.OpVarlenForward, flashattn.OpVarlenBackward: // the two sequences' FLOPs, each alone
				var flops float64
				for _, n := range []int{64, 192} {
					seq := flashattn.Dims{B: 1, Nq: n, Nk: n, Hq: 2, Hkv: 2, D: 64}
					if c.op == flashattn.OpVarlenBackward {
						flops += seq.BackwardFLOPs(true)
					} else {
						flops += seq.FLOPs(true)
					}
				}
				if got := r.TFLOPS * r.MedianMs * 1e9; math.Abs(got-flops) > 1e-9*flops {
					t.Errorf("%v %v: %.0f FLOPs counted, want %.0f", c.op, dt, got, flops)
				}
			case flashattn.OpKVCache:
				if r.Splits < 1 || r.KVBytes != int64(decode.B*decode.Nk*decode.Hkv*decode.D*2*2) || r.TBps <= 0 || r.PageSize != c.cfg.PageSize {
					t.Errorf("decode %v page %d: splits %d, %d bytes, %.3g TB/s, page %d", dt, c.cfg.PageSize, r.Splits, r.KVBytes, r.TBps, r.PageSize)
				}
			}
		}
	}
	if old, err := dev.BenchKVCache(decode, 64, nil, 1, 2); err != nil || old.Splits < 1 || old.PageSize != 64 || old.TBps <= 0 {
		t.Errorf("BenchKVCache: %+v, %v", old, err)
	}
	old, err := dev.BenchVarlen([]int{64, 192}, 2, 2, 64, &flashattn.Options{Causal: true}, 1, 2)
	if err != nil || old.Padded.Dims.B != 2 || old.Padded.Dims.Nq != 192 || old.VarlenBytes <= 0 || old.PaddedBytes <= old.VarlenBytes ||
		old.PaddedAllTFLOPS <= old.Padded.TFLOPS {
		t.Errorf("BenchVarlen: %+v, %v", old, err)
	}
}
