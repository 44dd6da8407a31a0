package flashattn

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/goflash/goflash/internal/kernels"
)

// queryDevices are no-context Devices of each kernel path and shared
// memory size the head-dim lists depend on: a T4, an RTX 3090 (sm_86, 99
// KiB per block), an A100 and an H100, and the A100 on a ladder rung.
func queryDevices() map[string]*Device {
	at := func(path, smem, rung int) *Device {
		d := noContextDevice()
		d.path, d.smemOptin, d.rung = path, smem, rung
		return d
	}
	return map[string]*Device{"T4": at(75, 64<<10, 0), "sm86": at(80, 99<<10, 0), "A100": at(80, 163<<10, 0),
		"H100": at(80, 227<<10, 0), "A100 rung 2": at(80, 163<<10, 2), "T4 rung 4": at(75, 64<<10, 4)}
}

// TestSupportedHeadDimsAnswersAsTheTables: SupportedHeadDims answers, for
// every op, dtype and the options that pick kernels, what the kernel
// tables say the device runs, and the deprecated lists are its answers.
func TestSupportedHeadDimsAnswersAsTheTables(t *testing.T) {
	for name, d := range queryDevices() {
		// has lists the head dims at which the path has a kernel of key k
		// that runs here: a base row, or a large one that fits the device.
		has := func(k kernels.Key) []int {
			var ds []int
			k.Arch = d.path
			for _, hd := range kernels.HeadDims(kernels.Key{Stage: kernels.Fwd, Arch: d.path}) {
				k.HeadDim, k.Large = hd, false
				_, base := kernels.Lookup(k)
				k.Large = true
				_, large := kernels.Lookup(k)
				if base || large && kernels.LargeFits(d.path, hd, k.BF16, d.smemOptin) {
					ds = append(ds, hd)
				}
			}
			return ds
		}
		fwdKey := func(mods kernels.Mods, packed, bf16 bool) kernels.Key {
			return kernels.Key{Stage: kernels.Fwd, Mods: mods, Packed: packed, BF16: bf16}
		}
		bwdKey := func(st kernels.Stage, mods kernels.Mods, ordered, bf16 bool) kernels.Key {
			return kernels.Key{Stage: st, Mods: mods, Ordered: ordered, BF16: bf16}
		}
		union := func(a, b []int) []int {
			out := slices.Clone(a)
			for _, x := range b {
				if !slices.Contains(out, x) {
					out = append(out, x)
				}
			}
			slices.Sort(out)
			return out
		}
		rung := d.rung != 0
		orNone := func(ds []int, none bool) []int {
			if none {
				return nil
			}
			return ds
		}
		fwd := kernels.HeadDims(kernels.Key{Stage: kernels.Fwd, Arch: d.path})
		if rung {
			fwd = kernels.HeadDims(kernels.Key{Stage: kernels.Fwd, Rung: d.rung})
		}
		decode := kernels.HeadDims(kernels.Key{Stage: kernels.Decode, Arch: d.path})
		on := kernels.ModOn
		bwd := func(det bool) []int {
			return union(has(bwdKey(kernels.BwdDKDV, 0, false, false)), has(bwdKey(kernels.BwdDKDVQ, 0, det, false)))
		}
		window := &Options{Window: &Window{Left: 8, Right: 0}}
		for _, c := range []struct {
			what string
			got  []int
			want []int
		}{
			{"HeadDims", d.HeadDims(), fwd},
			{"forward", d.SupportedHeadDims(OpForward, FP16, nil), fwd},
			{"raw forward", d.SupportedHeadDims(OpRawForward, FP16, nil), fwd},
			{"forward, softcap", d.SupportedHeadDims(OpForward, FP16, &Options{Softcap: 30}), orNone(has(fwdKey(kernels.FwdMods(true, false), false, false)), rung)},
			{"raw forward, softcap", d.SupportedHeadDims(OpRawForward, FP16, &Options{Softcap: 30}), nil},
			{"KVCacheHeadDims", d.KVCacheHeadDims(), orNone(decode, rung)},
			{"decode", d.SupportedHeadDims(OpKVCache, FP16, window), orNone(decode, rung)},
			{"PackedModHeadDims", d.PackedModHeadDims(FP16), orNone(has(fwdKey(on, false, false)), rung)},
			{"varlen forward, ALiBi", d.SupportedHeadDims(OpVarlenForward, FP16, &Options{ALiBi: []float64{1}}), orNone(has(fwdKey(kernels.FwdMods(false, true), false, false)), rung)},
			{"varlen forward", d.SupportedHeadDims(OpVarlenForward, FP16, nil), orNone(has(fwdKey(0, true, false)), rung)},
			{"ModBackwardHeadDims", d.ModBackwardHeadDims(FP16), orNone(union(has(bwdKey(kernels.BwdDKDV, on, false, false)), has(bwdKey(kernels.BwdDKDVQ, on, false, false))), rung)},
			{"backward, softcap", d.SupportedHeadDims(OpBackward, FP16, &Options{Softcap: 30}), orNone(union(has(bwdKey(kernels.BwdDKDV, on, false, false)), has(bwdKey(kernels.BwdDKDVQ, on, false, false))), rung)},
			{"varlen backward", d.SupportedHeadDims(OpVarlenBackward, FP16, nil), union(has(bwdKey(kernels.BwdDKDV, on, false, false)), has(bwdKey(kernels.BwdDKDVQ, on, false, false)))},
			{"backward, window, deterministic", d.SupportedHeadDims(OpBackward, FP16, &Options{Window: window.Window, Deterministic: true}),
				orNone(union(has(bwdKey(kernels.BwdDKDV, on, false, false)), has(bwdKey(kernels.BwdDKDVQ, on, true, false))), rung)},
			{"BackwardHeadDims", d.BackwardHeadDims(), bwd(false)},
			{"backward", d.SupportedHeadDims(OpBackward, FP16, nil), bwd(false)},
			{"DeterministicBackwardHeadDims", d.DeterministicBackwardHeadDims(), bwd(true)},
			{"deterministic backward", d.SupportedHeadDims(OpBackward, FP16, &Options{Deterministic: true}), bwd(true)},
			{"RawBackwardHeadDims", d.RawBackwardHeadDims(), has(bwdKey(kernels.BwdDKDV, 0, false, false))},
			{"raw backward", d.SupportedHeadDims(OpRawBackward, FP16, nil), has(bwdKey(kernels.BwdDKDV, 0, false, false))},
			{"raw backward, window", d.SupportedHeadDims(OpRawBackward, FP16, window), nil},
			{"forward+backward", d.SupportedHeadDims(OpForwardBackward, FP16, nil),
				slices.DeleteFunc(bwd(false), func(hd int) bool { return !slices.Contains(fwd, hd) })},
			{"bf16 forward", d.SupportedHeadDims(OpForward, BF16, nil), orNone(has(fwdKey(0, false, true)), d.path < 80 || rung)},
			{"bf16 backward", d.SupportedHeadDims(OpBackward, BF16, nil), orNone(union(has(bwdKey(kernels.BwdDKDV, 0, false, true)), has(bwdKey(kernels.BwdDKDVQ, 0, false, true))), d.path < 80)},
			{"bf16 PackedModHeadDims", d.PackedModHeadDims(BF16), orNone(has(fwdKey(on, false, true)), d.path < 80 || rung)},
			{"no op", d.SupportedHeadDims(0, FP16, nil), nil},
			{"no dtype", d.SupportedHeadDims(OpForward, 0, nil), nil},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("%s: %s %v, want %v", name, c.what, c.got, c.want)
			}
		}
		// The lists differ where the device's kernels differ: a sanity check
		// that the cases above compare something.
		if !rung && d.path == 80 && slices.Equal(d.SupportedHeadDims(OpBackward, FP16, nil), d.SupportedHeadDims(OpRawBackward, FP16, nil)) {
			t.Errorf("%s: the backward lists %v the raw backward's", name, d.SupportedHeadDims(OpBackward, FP16, nil))
		}
	}
	if got := (*Device)(nil).SupportedHeadDims(OpForward, FP16, nil); got != nil {
		t.Errorf("nil Device: %v", got)
	}
	if got := (&Device{}).SupportedHeadDims(OpForward, FP16, nil); got != nil {
		t.Errorf("zero Device: %v", got)
	}
}

// TestOpNames: every Op constant has a name; other values say what they are.
func TestOpNames(t *testing.T) {
	seen := map[string]bool{}
	for op := OpForward; op <= OpRawBackward; op++ {
		s := op.String()
		if s == "" || seen[s] || checkOp(op) != nil {
			t.Errorf("Op %d: %q (seen %v), check %v", int(op), s, seen[s], checkOp(op))
		}
		seen[s] = true
	}
	for _, op := range []Op{0, OpRawBackward + 1, -1} {
		var oe *OptionError
		if err := checkOp(op); !errors.As(err, &oe) || op.String() != fmt.Sprintf("Op(%d)", int(op)) {
			t.Errorf("Op %d: %q, %v", int(op), op, err)
		}
	}
}

// TestBenchRefusals: what Bench cannot time is an *OptionError naming the
// setting, before the device is asked.
func TestBenchRefusals(t *testing.T) {
	dims := Dims{B: 1, Nq: 128, Nk: 128, Hq: 2, Hkv: 2, D: 64}
	vl := Varlen{CuSeqlensQ: []int{0, 64, 128}, CuSeqlensK: []int{0, 64, 128}}
	for _, c := range []struct {
		op     Op
		dt     DType
		cfg    BenchConfig
		option string
	}{
		{0, FP16, BenchConfig{Reps: 1}, "op"},
		{OpRawForward, FP16, BenchConfig{Reps: 1}, "op"},
		{OpRawBackward, FP16, BenchConfig{Reps: 1}, "op"},
		{OpForward, 0, BenchConfig{Reps: 1}, "DType"},
		{OpForward, FP16, BenchConfig{}, "Reps/Warmup"},
		{OpBackward, FP16, BenchConfig{Reps: 1, Warmup: -1}, "Reps/Warmup"},
		{OpForward, FP16, BenchConfig{Reps: 1, Varlen: vl}, "Varlen"},
		{OpForward, FP16, BenchConfig{Reps: 1, PageSize: 16}, "PageSize"},
		{OpKVCache, FP16, BenchConfig{Reps: 1, PageSize: 24}, "PageSize"},
	} {
		_, err := noContextDevice().Bench(c.op, dims, c.dt, nil, c.cfg)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("Bench(%v, %v, %+v): %v, want an *OptionError for %s", c.op, c.dt, c.cfg, err, c.option)
		}
	}
	// A packed batch that is not B 1, and lengths that do not add up, are
	// refused as ForwardVarlen refuses them.
	var se *ShapeError
	if _, err := noContextDevice().Bench(OpVarlenForward, Dims{B: 2, Nq: 64, Nk: 64, Hq: 2, Hkv: 2, D: 64}, FP16, nil, BenchConfig{Reps: 1}); !errors.As(err, &se) {
		t.Errorf("varlen of B 2: %v, want a *ShapeError", err)
	}
	var de *DataError
	if _, err := noContextDevice().Bench(OpVarlenBackward, Dims{B: 1, Nq: 100, Nk: 128, Hq: 2, Hkv: 2, D: 64}, FP16, nil, BenchConfig{Reps: 1, Varlen: vl}); !errors.As(err, &de) {
		t.Errorf("varlen lengths of another total: %v, want a *DataError", err)
	}
}

// TestKernelsRefusals: an op that is none is an *OptionError, and a Device
// without a context (zero, nil) refuses as a closed one, raw ops too.
func TestKernelsRefusals(t *testing.T) {
	dims := Dims{B: 1, Nq: 128, Nk: 128, Hq: 2, Hkv: 2, D: 64}
	var oe *OptionError
	if _, err := noContextDevice().Kernels(0, dims, FP16, nil); !errors.As(err, &oe) || oe.Option != "op" {
		t.Errorf("Kernels(0): %v", err)
	}
	if _, err := noContextDevice().Kernels(OpForward, dims, FP16, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("Kernels on a zero Device: %v", err)
	}
	if _, err := (*Device)(nil).Kernels(OpBackward, dims, FP16, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("Kernels on a nil Device: %v", err)
	}
	if _, err := (*Device)(nil).Kernels(OpRawBackward, dims, FP16, nil); !errors.Is(err, ErrDeviceClosed) {
		t.Errorf("Kernels(OpRawBackward) on a nil Device: %v", err)
	}
}
