package flashattn_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

func TestHopperKernelTable(t *testing.T) {
	tab, dims := flashattn.HopperKernelTable(), flashattn.HopperHeadDims()
	if len(dims) == 0 {
		t.Fatal("no Hopper head dims")
	}
	mods := []string{"fwd_mod", "fwd_mod_cap", "fwd_mod_alibi", "fwd_mod_cap_alibi"}
	count := map[string]int{}
	for _, k := range tab {
		count[k.Pass]++
		if k.Path != 90 || k.DType != flashattn.FP16 && k.DType != flashattn.BF16 || !slices.Contains(dims, k.HeadDim) {
			t.Errorf("bad Hopper row %+v", k)
		}
		switch k.Pass {
		case "bwd_pre", "bwd_dqconv", "bwd_dkdvq", "bwd_dkdvqdet":
			single := k.Pass == "bwd_dkdvq" || k.Pass == "bwd_dkdvqdet"
			if k.Persistent || single != (k.SmemBytes > 0) || !single && k.Causal || single && k.Warps != 4*(k.Bc/64+1) {
				t.Errorf("bad Hopper backward row %+v", k)
			}
			if !slices.ContainsFunc(flashattn.BackwardKernelTable(90), func(s flashattn.KernelInfo) bool { return s.HeadDim == k.HeadDim && s.Pass == "bwd_dkdv" }) {
				t.Errorf("%s has no sm_80 backward beside it (ForcePath(80), varlen and the modifiers run that)", k.Symbol)
			}
			continue
		}
		if !(k.Pass == "fwd" || k.Pass == "fwd_varlen" || k.Pass == "fwd_short" && k.MaxNq > 0 || slices.Contains(mods, k.Pass) && !k.Causal) ||
			k.Br%64 != 0 || k.Warps != 4*(k.Br/64+1) || !k.Persistent || (k.Pass == "fwd_short") != (k.MaxNq > 0) {
			t.Errorf("bad Hopper row %+v", k)
		}
		if !slices.ContainsFunc(flashattn.KernelTable(90), func(s flashattn.KernelInfo) bool { return s.HeadDim == k.HeadDim && s.Causal == k.Causal }) {
			t.Errorf("%s has no sm_80 kernel beside it (ForcePath(80), varlen and raw fallbacks run that)", k.Symbol)
		}
	}
	// Per head dim and dtype: a causal and a non-causal forward and their
	// varlen twins, four modified ones; the backward's pre and convert, its single pass causal
	// and not, and at some head dims (at least D 128) its ordered twins.
	n := 2 * len(dims)
	if count["fwd"] != 2*n || count["fwd_varlen"] != 2*n || count["fwd_mod"] != n || count["bwd_pre"] != n || count["bwd_dqconv"] != n || count["bwd_dkdvq"] != 2*n ||
		count["bwd_dkdvqdet"] == 0 || count["bwd_dkdvqdet"]%4 != 0 || count["bwd_dkdvqdet"] > 2*n {
		t.Errorf("Hopper kernels by pass %v", count)
	}
}

// TestGPUHopperForward: on an sm_90 GPU, dense fp16 forwards at the Hopper
// head dims run the sm_90a kernels (path 90, SASS, no local memory), but
// causal ones of at most SM80CausalMaxNk keys, and everything else the
// sm_80 path; ForcePath(80) and back switch them. Calls with a window,
// softcap or ALiBi run the modified Hopper kernels, bf16 calls the bf16
// twins. A raw call
// whose K and V are broadcast over the batch (stride 0, which a TMA tensor
// map cannot address) runs the sm_80 kernel: bit for bit the dense call's
// output on the forced sm_80 path. The Hopper kernels' accuracy is the
// conformance suites' (TestGPUConformance and the raw ones run them here),
// and here that of a larger problem.
func TestGPUHopperForward(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() != 90 {
		if err := dev.ForcePath(90); err == nil {
			t.Fatalf("%s: ForcePath(90) succeeded", dev.Info())
		}
		t.Skipf("%s is not an sm_90 GPU: the Hopper forward does not run here", dev.Info())
	}
	hd := flashattn.HopperHeadDims()
	maxNk := map[int]int{} // causal calls of at most this many keys run the sm_80 kernel
	for _, k := range flashattn.HopperKernelTable() {
		if k.Causal && k.Pass == "fwd" {
			maxNk[k.HeadDim] = k.SM80CausalMaxNk
		}
	}
	for _, path := range []int{0, 80, 90} {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		for _, d := range dev.SupportedHeadDims(flashattn.OpForward, flashattn.FP16, nil) {
			for _, causal := range []bool{false, true} {
				for _, nk := range []int{1, max(maxNk[d], 1), maxNk[d] + 1, 4096} {
					k, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: 1, Nk: nk, Hq: 1, Hkv: 1, D: d}, causal)
					if err != nil {
						t.Fatal(err)
					}
					want := 80
					if path != 80 && slices.Contains(hd, d) && (!causal || nk > maxNk[d]) {
						want = 90
					}
					if k.Path != want || k.BinaryArch != 90 || k.FromPTX || k.LocalBytes != 0 {
						t.Errorf("ForcePath(%d), D %d causal %v Nk %d: runs %+v, want path %d SASS", path, d, causal, nk, k, want)
					}
				}
			}
		}
	}
	if err := dev.ForcePath(0); err != nil {
		t.Fatal(err)
	}
	x := flashattn.Random(flashattn.Shape{B: 1, N: 2048, H: 2, D: hd[0]}, 1) // above every SM80CausalMaxNk
	run := func(name string, up func(*flashattn.Tensor) (*flashattn.DeviceTensor, error), o *flashattn.Options, want int) {
		d, err := up(x)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free()
		r, err := dev.Forward(d, d, d, o)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Free()
		if r.Kernel.Path != want {
			t.Errorf("%s: ran %+v, want path %d", name, r.Kernel, want)
		}
	}
	// Calls of at most a short-call kernel's MaxNq query rows run it, longer
	// ones the head dim's other Hopper kernel: the tiles cases below run both.
	long := longNq()
	for _, k := range flashattn.HopperKernelTable() {
		if k.Pass != "fwd_short" || k.DType != flashattn.FP16 {
			continue
		}
		for nq, want := range map[int]string{700: "fwd_short", long: "fwd"} {
			got, err := forwardKernel(dev, flashattn.Dims{B: 1, Nq: nq, Nk: nq + 100, Hq: 1, Hkv: 1, D: k.HeadDim}, k.Causal)
			if err != nil {
				t.Fatal(err)
			}
			if got.Pass != want || got.Path != 90 {
				t.Errorf("D %d causal %v Nq %d: runs %s (%s), want pass %s", k.HeadDim, k.Causal, nq, got.Symbol, got.Pass, want)
			}
		}
	}
	// Beyond the suite's sizes: odd lengths, Nq < Nk above every
	// SM80CausalMaxNk, GQA 4, each head dim and mask, fp16 and bf16.
	b := deviceBackend(dev, "gpu-sm90a")
	b.Backward = nil
	bb := attntest.Backend{Name: "gpu-sm90a-bf16", Precision: attntest.BF16, Forward: bf16ForwardHost(dev), Plain: true,
		ModsForward: true, HeadDims: hd}
	var cases []attntest.Case
	for _, d := range hd {
		for _, causal := range []bool{false, true} {
			cases = append(cases, attntest.Case{Name: fmt.Sprintf("tiles-d%d-causal%v", d, causal), B: 1, Nq: 700, Nk: 1100, Hq: 4, Hkv: 1, D: d, Causal: causal, Seed: 7})
			if hasShort(d) {
				cases = append(cases, attntest.Case{Name: fmt.Sprintf("tiles-long-d%d-causal%v", d, causal), B: 1, Nq: long, Nk: long + 100, Hq: 1, Hkv: 1, D: d, Causal: causal, Seed: 12})
			}
		}
		cases = append(cases,
			// The modified kernels: a window reaching both ways, softcap and ALiBi.
			attntest.Case{Name: fmt.Sprintf("mods-d%d", d), B: 1, Nq: 700, Nk: 1100, Hq: 4, Hkv: 2, D: d,
				Window: &flashattn.Window{Left: 300, Right: 40}, Softcap: 20, ALiBi: true, Seed: 8},
			// ALiBi alone: its column-bias form on the clean blocks either side
			// of each consumer's diagonal.
			attntest.Case{Name: fmt.Sprintf("alibi-d%d", d), B: 1, Nq: 700, Nk: 1100, Hq: 4, Hkv: 2, D: d, ALiBi: true, Seed: 9},
			// Slopes steep against the scale: head 0's slope/scale is past 2^15,
			// the bound of the ALiBi k16 step's two halves (it takes
			// apply_side), the others' within it (large column terms from the GEMM).
			attntest.Case{Name: fmt.Sprintf("alibi-steep-d%d", d), B: 1, Nq: 700, Nk: 1100, Hq: 4, Hkv: 2, D: d, ALiBi: true, Scale: 5e-6, Seed: 10})
	}
	for _, be := range []attntest.Backend{b, bb} {
		for _, c := range cases {
			t.Run(be.Name+"/"+c.Name, func(t *testing.T) { attntest.RunCase(t, be, c) })
		}
	}
	run("fp16", dev.Upload, nil, 90)
	run("fp16 causal", dev.Upload, &flashattn.Options{Causal: true}, 90)
	run("bf16", dev.UploadBF16, nil, 90)
	run("fp16 window", dev.Upload, &flashattn.Options{Window: &flashattn.Window{Left: 8, Right: 0}}, 90)
	run("fp16 softcap", dev.Upload, &flashattn.Options{Softcap: 30}, 90)
	run("fp16 causal ALiBi", dev.Upload, &flashattn.Options{Causal: true, ALiBi: []float64{0.5, 0.25}}, 90)
	run("bf16 window", dev.UploadBF16, &flashattn.Options{Window: &flashattn.Window{Left: 8, Right: 0}}, 90)

	// K and V broadcast over a batch of 2: the raw plan's sm_80 kernel.
	u := newRawUser(t)
	dims := flashattn.Dims{B: 2, Nq: 100, Nk: 70, Hq: 4, Hkv: 2, D: hd[len(hd)-1]}
	q := flashattn.Random(dims.QShape(), 2)
	kv1 := flashattn.Shape{B: 1, N: dims.Nk, H: dims.Hkv, D: dims.D}
	k1, v1 := flashattn.Random(kv1, 3), flashattn.Random(kv1, 4)
	plan, err := dev.NewRawForward(dims, flashattn.FP16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Kernel().Path != 90 {
		t.Fatalf("raw plan runs %+v, want the Hopper kernel", plan.Kernel())
	}
	qb, kb, vb := u.upload16(u.bits(q.Data)), u.upload16(u.bits(k1.Data)), u.upload16(u.bits(v1.Data))
	out, lse := u.output(dims.QShape()), u.lseBuffer(dims)
	defer u.free(qb, kb, vb, out.buf, lse)
	bcast := flashattn.Strides{0, dims.Hkv * dims.D, dims.D, 1}
	err = plan.Enqueue(u.s.Handle(), &flashattn.RawForwardArgs{
		Q:   flashattn.RawTensor{Ptr: qb.b.Ptr(), Strides: dims.QShape().ContiguousStrides(), Bytes: 2 * dims.QShape().Numel()},
		K:   flashattn.RawTensor{Ptr: kb.b.Ptr(), Strides: bcast, Bytes: 2 * kv1.Numel()},
		V:   flashattn.RawTensor{Ptr: vb.b.Ptr(), Strides: bcast, Bytes: 2 * kv1.Numel()},
		Out: out.raw(0), LSE: flashattn.RawBuffer{Ptr: lse.b.Ptr(), Bytes: dims.LSEBytes()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := u.download(out, dims.QShape())
	// The same problem with K and V copied per batch, on the forced sm_80 path.
	k2, v2 := flashattn.Random(dims.KVShape(), 0), flashattn.Random(dims.KVShape(), 0)
	for b := range 2 {
		copy(k2.Data[b*len(k1.Data):], k1.Data)
		copy(v2.Data[b*len(v1.Data):], v1.Data)
	}
	if err := dev.ForcePath(80); err != nil {
		t.Fatal(err)
	}
	ref, err := dev.ForwardHost(q, k2, v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Data, ref.Out.Data) {
		t.Errorf("broadcast raw call differs from the dense sm_80 call (%s)", ref.Reason)
	}
}

// TestGPUHopperBackward: on an sm_90 GPU, dense backwards at the Hopper
// head dims without a window, softcap or ALiBi run the Hopper single pass
// (pre, pass, convert, all path 90; Deterministic its ordered twin where
// HopperKernelTable has one), fp16 and bf16; everything else, and every
// call after ForcePath(80), the sm_80 backward. Accuracy is the conformance
// suites' (TestGPUConformanceBackward, TestGPUConformanceBF16Backward run
// these kernels here).
func TestGPUHopperBackward(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() != 90 {
		t.Skipf("%s is not an sm_90 GPU: the Hopper backward does not run here", dev.Info())
	}
	defer func() {
		if err := dev.ForcePath(0); err != nil {
			t.Error(err)
		}
	}()
	tab := flashattn.HopperKernelTable()
	hd := flashattn.HopperHeadDims()
	for _, path := range []int{0, 80} {
		if err := dev.ForcePath(path); err != nil {
			t.Fatal(err)
		}
		for _, d := range dev.SupportedHeadDims(flashattn.OpBackward, flashattn.FP16, nil) {
			for _, dt := range []flashattn.DType{flashattn.FP16, flashattn.BF16} {
				for _, o := range []flashattn.Options{{}, {Causal: true}, {Deterministic: true}, {Causal: true, Deterministic: true}, {Softcap: 30}} {
					dims := flashattn.Dims{B: 2, Nq: 300, Nk: 500, Hq: 4, Hkv: 2, D: d}
					ks, err := dev.Kernels(flashattn.OpBackward, dims, dt, &o)
					if err != nil {
						t.Fatal(err)
					}
					pass := map[bool]string{false: "bwd_dkdvq", true: "bwd_dkdvqdet"}[o.Deterministic]
					has := slices.ContainsFunc(tab, func(k flashattn.KernelInfo) bool {
						return k.Pass == pass && k.HeadDim == d && k.DType == dt && k.Causal == o.Causal
					})
					hopper := path == 0 && slices.Contains(hd, d) && o.Softcap == 0 && has
					want := []string{"bwd_pre", pass, "bwd_dqconv"}
					ok := len(ks) == 3
					for i, k := range ks {
						ok = ok && (k.Path == 90) == hopper && k.DType == dt && (!hopper || k.Pass == want[i] && k.BinaryArch == 90 && !k.FromPTX && k.LocalBytes == 0)
					}
					if !ok {
						t.Errorf("ForcePath(%d) D%d %v %+v: kernels %+v; want the Hopper single pass: %v", path, d, dt, o, ks, hopper)
					}
				}
			}
		}
	}
}

// TestGPUHopperFewCTAs runs the conformance suite and TestGPUHopperForward's
// larger cases on the Hopper kernels launched with 1, 3 and 5 CTAs, where
// every CTA walks many tiles (the suite's problems have fewer tiles than an
// H200 has SMs, so at one CTA per SM each CTA takes one): the persistent
// loop's stage and phase bookkeeping across tiles, causal rounds taken from
// both ends, tiles that see no key.
func TestGPUHopperFewCTAs(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() != 90 {
		t.Skipf("%s is not an sm_90 GPU: the Hopper forward does not run here", dev.Info())
	}
	for _, k := range flashattn.HopperKernelTable() {
		if !k.Persistent && strings.HasPrefix(k.Pass, "fwd") {
			t.Fatalf("%s is not persistent", k.Symbol)
		}
	}
	hd := flashattn.HopperHeadDims()
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("ctas%d", n), func(t *testing.T) {
			defer flashattn.SetPersistentCTAs(dev, n)()
			b := deviceBackend(dev, fmt.Sprintf("gpu-sm90a-%dctas", n))
			b.Backward = nil
			b.HeadDims = hd
			b.Forward = onlyHeadDims(hd, "no Hopper kernel: the sm_80 path, which TestGPUConformance runs", b.Forward)
			attntest.Run(t, b)
			for _, d := range hd {
				for _, causal := range []bool{false, true} {
					cs := []attntest.Case{{Name: fmt.Sprintf("tiles-d%d-causal%v", d, causal), B: 2, Nq: 700, Nk: 1100, Hq: 4, Hkv: 2, D: d, Causal: causal, Seed: 11}}
					if hasShort(d) {
						cs = append(cs, attntest.Case{Name: fmt.Sprintf("tiles-long-d%d-causal%v", d, causal), B: 1, Nq: longNq(), Nk: longNq() + 100, Hq: 1, Hkv: 1, D: d, Causal: causal, Seed: 13})
					}
					for _, c := range cs {
						t.Run(c.Name, func(t *testing.T) { attntest.RunCase(t, b, c) })
					}
				}
			}
		})
	}
}

// TestGPUHopperCausalGroups: the plain causal Hopper pass with its (batch,
// kv head) pairs in two groups of unequal size (Tc 17, at least 2·SMs/Tc
// pairs a group), GQA, Nq below Nk, against the float64 reference at the
// groups' first and last entries. The suites' shapes have too few key blocks
// for the groups.
func TestGPUHopperCausalGroups(t *testing.T) {
	dev := openGPU(t)
	if dev.Info().Arch() != 90 {
		t.Skipf("%s is not an sm_90 GPU: the Hopper backward does not run here", dev.Info())
	}
	const nk, tc = 2052, 17 // key blocks of 128
	per := (2*dev.Info().SMs + tc - 1) / tc
	b := attntest.ForBackend(flashattn.GPU)
	b.Name = "gpu-hopper-causal-groups"
	for _, d := range flashattn.HopperHeadDims() {
		c := attntest.Case{Name: fmt.Sprintf("causal-groups-d%d", d), B: 2*per + 1, Nq: 300, Nk: nk, Hq: 2, Hkv: 1, D: d, Causal: true, Seed: 53}
		t.Run(c.Name, func(t *testing.T) { attntest.RunCaseBatches(t, b, c, []int{0, per, per + 1, 2 * per}) })
	}
}

// hasShort says whether head dim d has a short-call Hopper kernel, whose
// calls of Nq 700 take it: its tiles cases then add a longer one (longNq).
func hasShort(d int) bool {
	return slices.ContainsFunc(flashattn.HopperKernelTable(), func(k flashattn.KernelInfo) bool { return k.Pass == "fwd_short" && k.HeadDim == d })
}

// longNq is a query length past every short-call Hopper kernel's MaxNq (and
// no multiple of a tile's rows), so a call of it runs the head dim's other
// Hopper kernel.
func longNq() int {
	n := 0
	for _, k := range flashattn.HopperKernelTable() {
		n = max(n, k.MaxNq)
	}
	return n + 276
}
