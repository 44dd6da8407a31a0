package flashattn

import (
	"fmt"
	"math"
	"slices"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// A plan is what one GPU call runs: its kernels (keys of the generated
// table), their launches, the decode splits and the scratch sizes. planOf
// makes it from numbers alone, a device's capabilities and a problem, so
// every choice is one pure function that tests run without a GPU; the
// Device loads the plan's kernels and launches them (Device.plan).

// planDevice is what a plan reads of a device. The kernel sets it chooses
// from are the shipped table of its path (the family images, or their Turing PTX
// when forced), the Hopper kernels (sm90a), a ladder rung (rung) and the
// forwards an NVRTC build of the rung in use holds (nvrtc).
type planDevice struct {
	name      string // DeviceInfo.String(), for errors
	path      int    // the kernel path in use: 75 (Turing code) or 80 (sm_80+ code); 0: none
	sm90a     bool   // dense forwards and unmodified backwards run the Hopper kernels where they have one (Device.sm90a)
	smemOptin int    // opt-in shared memory per block: whether the Large rows run (kernels.LargeFits)
	smemPerSM int    // shared memory per SM: decode CTAs per SM (decodePerSM)
	sms       int    // multiprocessors: decode splits
	ctas      int    // the persistent kernels' grid (Device.ctas)
	maxGridY  int
	rung      int // a ladder rung 1-4 the forward runs (UseRung); 0: the shipped kernels
	// nvrtc: the plain fp16 forwards of the NVRTC build of the rung in use
	// (LoadRungSource; the last rung's replace the shipped forward and the
	// Hopper one), in the build's order; nil for none.
	nvrtc     []kernels.Variant
	nvrtcRung int // the rung nvrtc was compiled from
}

// planOp is the kind of call a plan is for.
type planOp uint8

const (
	opForward     planOp = iota // Forward, ForwardVarlen and their host and benchmark forms
	opBackward                  // Backward, BackwardVarlen and theirs
	opDecode                    // ForwardKVCache (paged or not)
	opRawForward                // NewRawForward: the plain kernels, the sm_80 one beside a Hopper one
	opRawBackward               // NewRawBackward: the three kernels, which hold no dQ accumulator
	opKernel                    // KernelTable: the plain fp16 forward Forward runs for dims, no problem checks
	opBwdKernels                // the plain backward's kernels, no problem checks (the limits' tests)
)

// planRequest is one call's problem as a plan needs it.
type planRequest struct {
	op    planOp
	p     problem
	dt    DType
	paged bool // decode: the cache has a block table
}

// plan is the kernels of one call in launch order and how to launch them.
type plan struct {
	kernels []kernels.Variant
	cfgs    []cuda.LaunchConfig
	nvrtc   bool // kernels[0] is the NVRTC build's (Device.nvrtcRungInUse().funcs), not an image's
	// alt (raw forward on the Hopper kernel): the sm_80 kernel of the same
	// problem, for operands whose strides TMA cannot address.
	alt    *kernels.Variant
	altCfg cuda.LaunchConfig
	// The single pass's dQ accumulator: its 4-byte length (float32, then the
	// ordered kernel's int32 counters) and rows per slab
	// (BwdParams.DQAccumRows); 0, 0 for the three kernels.
	dqAccumLen, dqAccumRows int
	// detSpread (the Hopper ordered non-causal pass, Sm90BwdArgs.DetSpread):
	// each key block starts at its own query block, which needs a (batch, kv
	// head)'s Tc CTAs resident at once: asked for where Tc is at most half
	// the SMs (one CTA per SM), so a GPU shared with other work still fits them.
	detSpread bool
	// causalGroups (the Hopper plain causal pass, Sm90BwdArgs.CausalGroups):
	// the (batch, kv head) pairs in groups of about 2·SMs/Tc, each group's
	// key blocks heaviest first (hopperCausalGroups).
	causalGroups int
	// Decode: the KV splits, the CTAs sharing a group's merge, and the split
	// workspace (decodeWorkspace; 0 for one split).
	splits, mergeCTAs        int
	oPart, lsePart, counters int
}

// planOf is the plan of r on c, or the *UnsupportedError (*ShapeError for
// dims that are none) that says why c cannot run it.
func planOf(c planDevice, r planRequest) (plan, error) {
	switch r.op {
	case opForward, opRawForward, opKernel:
		return c.forward(r)
	case opBackward, opRawBackward, opBwdKernels:
		return c.backward(r)
	case opDecode:
		return c.decode(r)
	}
	return plan{}, fmt.Errorf("flashattn: no plan for op %d", r.op)
}

// forward plans a forward: the plain kernel (on an H100/H200, fp16 or bf16
// at the Hopper forward's head dims: that one, unless ForcePath), or with a
// window, softcap or ALiBi the modified one with exactly p's softcap and
// ALiBi compiled in (kernels.FwdMods; the window, and causal as its right
// edge 0, are parameters), for packed sequences the varlen one (with
// modifiers the modified one, which takes the cumulative lengths at run
// time); a ladder rung or an NVRTC build replaces the plain fp16 kernel.
func (c planDevice) forward(r planRequest) (plan, error) {
	p, bf16 := r.p, r.dt == BF16
	if err := p.Validate(); err != nil {
		return plan{}, err
	}
	if r.op == opRawForward {
		if f, v := p.modFeature(); f != "" {
			return plan{}, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: "raw calls run the plain kernels only (Device.Forward runs score modifiers)"}
		}
	}
	k := kernels.Key{Stage: kernels.Fwd, HeadDim: p.D, Causal: p.Causal, BF16: bf16}
	if p.varlen != nil {
		if c.rung != 0 {
			return plan{}, &UnsupportedError{Backend: GPU, Feature: varlenEntry, Value: fmt.Sprintf("rung %d", c.rung),
				Reason: "the kernel ladder has no varlen kernels"}
		}
		k.Packed = true
	}
	if p.mods() {
		if c.rung != 0 {
			f, v := p.modFeature()
			return plan{}, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: fmt.Sprintf("the kernel ladder's rung %d has no score modifiers", c.rung)}
		}
		k.Mods, k.Packed, k.Causal = kernels.FwdMods(p.Softcap > 0, p.ALiBi != nil), false, false
	}
	var pl plan
	var err error
	v, ok := c.hopper(k, p)
	switch {
	case ok:
	case bf16:
		if err := checkDType(BF16, c.path); err != nil {
			return plan{}, err
		}
		if c.rung != 0 {
			return plan{}, &UnsupportedError{Backend: GPU, Feature: "dtype", Value: BF16.String(),
				Reason: fmt.Sprintf("the kernel ladder's rung %d is fp16 only", c.rung)}
		}
		v, err = c.shipped(k)
	case k.Mods == 0 && !k.Packed && c.nvrtc != nil:
		v, err = c.nvrtcForward(p.D, p.Causal)
		pl.nvrtc = err == nil
	case k.Mods == 0 && !k.Packed && c.rung != 0:
		v, err = c.rungForward(p.D, p.Causal)
	default:
		v, err = c.shipped(k)
	}
	if err == nil && r.op != opKernel {
		err = c.checkProblem(p)
	}
	if err != nil {
		return plan{}, err
	}
	if pl.nvrtc && r.op == opRawForward {
		// A rung compiled by LoadRungSource lives in a module of its own that
		// ResetRungSource unloads: a plan must not outlive it.
		return plan{}, &UnsupportedError{Backend: GPU, Feature: "raw plan", Value: v.Symbol,
			Reason: "raw plans run the shipped kernels; ResetRungSource first (an NVRTC-compiled rung is for Forward and BenchForward)"}
	}
	f := fieldsOf(p)
	pl.kernels, pl.cfgs = []kernels.Variant{v}, []cuda.LaunchConfig{fwdConfig(v, f, c.ctas)}
	if r.op == opRawForward && v.Arch == kernels.SM90A {
		alt, err := c.shipped(kernels.Key{Stage: kernels.Fwd, HeadDim: p.D, Causal: p.Causal, BF16: bf16})
		if err != nil {
			return plan{}, err
		}
		pl.alt, pl.altCfg = &alt, fwdConfig(alt, f, c.ctas)
	}
	if r.op != opKernel {
		if err := c.checkPacked(p); err != nil {
			return plan{}, err
		}
	}
	return pl, nil
}

// hopper is the Hopper forward of key k (fwd, plain or modified, fp16 or
// bf16; packed sequences without modifiers: its varlen twins) where the
// device runs it: not on a ladder rung, not where an NVRTC build replaces
// the plain forward, and not for causal calls short enough that the sm_80
// kernel is faster (Variant.SM80CausalMaxNk). A dense plain call of at most
// a short-call kernel's MaxNq query rows runs that kernel (Key.Short).
func (c planDevice) hopper(k kernels.Key, p problem) (kernels.Variant, bool) {
	if !c.sm90a || c.rung != 0 || p.varlen != nil && !k.Packed || k.Mods == 0 && c.nvrtc != nil && !k.BF16 {
		return kernels.Variant{}, false
	}
	k.Arch = kernels.SM90A
	if k.Mods == 0 && !k.Packed {
		short := k
		short.Short = true
		if v, ok := kernels.Lookup(short); ok && p.Nq <= v.MaxNq {
			return v, true
		}
	}
	v, ok := kernels.Lookup(k)
	if !ok || p.Nk <= v.SM80CausalMaxNk {
		return kernels.Variant{}, false
	}
	return v, true
}

// lookup is the table's kernel of key k on the path in use: its Large row
// where the device's opt-in shared memory fits every Large kernel of the
// head dim and dtype (kernels.LargeFits), else its base row.
func (c planDevice) lookup(k kernels.Key) (kernels.Variant, bool) {
	k.Arch = c.path
	if kernels.LargeFits(c.path, k.HeadDim, k.BF16, c.smemOptin) {
		large := k
		large.Large = true
		if v, ok := kernels.Lookup(large); ok {
			return v, true
		}
	}
	return kernels.Lookup(k)
}

// shipped is lookup's kernel of k, or the *UnsupportedError that lists the
// head dims the path has kernels of k's stage and modifiers for; bwd_pre and
// bwd_dqconv do not depend on the mask, so their key is the non-causal one.
func (c planDevice) shipped(k kernels.Key) (kernels.Variant, error) {
	if k.Stage == kernels.BwdPre || k.Stage == kernels.BwdDQConv {
		k.Causal = false
	}
	if k.Arch == kernels.SM90A { // backwardKeys' Hopper keys, which it looked up
		if v, ok := kernels.Lookup(k); ok {
			return v, nil
		}
	}
	v, ok := c.lookup(k)
	if ok {
		return v, nil
	}
	what := "kernels"
	if k.Stage != kernels.Fwd {
		what = "backward kernels"
	}
	if k.BF16 {
		what = "bf16 " + what
	}
	if k.Stage == kernels.Decode {
		what = "decode kernels"
	}
	return v, &UnsupportedError{Backend: GPU, Feature: "head dim", Value: fmt.Sprint(k.HeadDim),
		Reason: fmt.Sprintf("the sm_%d %s exist for head dims %v", c.path, what,
			kernels.HeadDims(kernels.Key{Stage: k.Stage, Mods: k.Mods, Packed: k.Packed, Ordered: k.Ordered, Arch: c.path}))}
}

// rungForward is the forward of ladder rung c.rung for a head dim and mask.
func (c planDevice) rungForward(headDim int, causal bool) (kernels.Variant, error) {
	k := kernels.Key{Stage: kernels.Fwd, HeadDim: headDim, Causal: causal, Rung: c.rung}
	if v, ok := kernels.Lookup(k); ok {
		return v, nil
	}
	k.HeadDim = 0
	return kernels.Variant{}, &UnsupportedError{Backend: GPU, Feature: "head dim", Value: fmt.Sprint(headDim),
		Reason: fmt.Sprintf("ladder rung %d has kernels for head dims %v", c.rung, kernels.HeadDims(k))}
}

// nvrtcForward is the NVRTC build's forward for a head dim and mask.
func (c planDevice) nvrtcForward(headDim int, causal bool) (kernels.Variant, error) {
	var ds []int
	for _, v := range c.nvrtc {
		if v.HeadDim == headDim && v.Causal == causal {
			return v, nil
		}
		if !v.Causal {
			ds = append(ds, v.HeadDim)
		}
	}
	return kernels.Variant{}, &UnsupportedError{Backend: GPU, Feature: "head dim", Value: fmt.Sprint(headDim),
		Reason: fmt.Sprintf("rung %d's edited source has kernels for head dims %v", c.nvrtcRung, ds)}
}

// backward plans a backward: pre, then (backwardKeys) the single pass and
// its dQ convert kernel or dK/dV and dQ, with the dQ accumulator the single
// pass needs.
func (c planDevice) backward(r planRequest) (plan, error) {
	p := r.p
	if r.op == opRawBackward {
		// The plain three kernels only: a window, softcap or ALiBi needs the
		// _mod pair and its parameters, which Device.Backward sets up.
		if f, v := p.modFeature(); f != "" {
			return plan{}, &UnsupportedError{Backend: GPU, Feature: f, Value: v,
				Reason: "the raw backward runs the plain three kernels; Device.Backward runs the modifiers' backward"}
		}
	}
	keys, err := c.backwardKeys(r)
	if err != nil {
		return plan{}, err
	}
	if r.dt == BF16 {
		if err := checkDType(BF16, c.path); err != nil {
			return plan{}, err
		}
	}
	if err := p.Validate(); err != nil {
		return plan{}, err
	}
	var pl plan
	for _, k := range keys {
		v, err := c.shipped(k)
		if err != nil {
			return plan{}, err
		}
		pl.kernels = append(pl.kernels, v)
	}
	if r.op != opBwdKernels {
		if err := c.checkProblem(p); err != nil {
			return plan{}, err
		}
		if err := c.checkPacked(p); err != nil {
			return plan{}, err
		}
	}
	pl.cfgs = bwdConfigs(pl.kernels, fieldsOf(p))
	if v := pl.kernels[1]; v.Stage == kernels.BwdDKDVQ { // its tile, Large or not, sets the accumulator's query blocks; packed: Nq is the total
		if p.varlen != nil {
			seqs := p.varlen.Seqs()
			pl.dqAccumLen, pl.dqAccumRows = kernels.DQAccumLenPacked(v, seqs, p.Nq, p.Hq), kernels.DQAccumRowsPacked(seqs, p.Nq)
		} else {
			pl.dqAccumLen, pl.dqAccumRows = kernels.DQAccumLen(v, p.B, p.Nq, p.Hq), kernels.DQAccumRows(v, p.Nq)
		}
		pl.detSpread = v.Arch == kernels.SM90A && v.Ordered && !v.Causal && (p.Nk+v.Bc-1)/v.Bc <= c.sms/2
		if v.Arch == kernels.SM90A && !v.Ordered && v.Causal {
			pl.causalGroups = hopperCausalGroups(p.B*p.Hkv, (p.Nk+v.Bc-1)/v.Bc, c.sms)
		}
	}
	return pl, nil
}

// hopperCausalGroups is the number of groups the plain causal Hopper pass
// splits its bhs (batch, kv head) pairs of tc key blocks into (one CTA per
// key block and pair, one CTA per SM): groups of at least 2·sms/tc pairs, so
// that a group's CTAs average at least a CTA's full length per SM and its
// heaviest (first) CTAs end before the group's last, lightest ones. 0 (each
// pair's key blocks lightest first) below causalGroupsMinTc key blocks.
func hopperCausalGroups(bhs, tc, sms int) int {
	if tc < causalGroupsMinTc {
		return 0
	}
	per := max(1, (2*sms+tc-1)/tc)
	if per >= bhs {
		return 1
	}
	return bhs / per // every group at least per pairs
}

// causalGroupsMinTc: with fewer key blocks a CTA is short and the
// lightest-first tail costs little, while the groups spread the resident CTAs
// over more pairs: the whole causal backward at Tc 8 (N 1024) is 0.93x (D128)
// and 0.97x (D64) as fast grouped, at Tc 16-128 1.01-1.08x (fp16, H100).
const causalGroupsMinTc = 16

// backwardKeys are the three kernels of a backward, in launch order (the
// launch contract of internal/kernels):
//   - the raw backward: pre, dK/dV, dQ (it holds no dQ accumulator);
//   - with a window, softcap or ALiBi: pre, then the modified dK/dV and dQ
//     (run-time flags, deterministic, even where the plain call runs the
//     single pass; causal is the window's right edge, so the keys are the
//     non-causal ones); packed sequences after the varlen pre;
//   - packed sequences: the varlen three;
//   - a head dim whose backward is the single pass alone (D 256): for
//     modifiers and packed sequences its modified twin (atomic dQ), with
//     Options.Deterministic the ordered one, after the (varlen) pre;
//   - on an H100/H200 (not forced to the sm_80 path), dense, unmodified, at
//     the Hopper backward's head dims: its single pass (Arch 90;
//     deterministic: its ordered twin);
//   - else the single pass (deterministic: its ordered twin, which large
//     rows have) where the device has one, or pre, dK/dV, dQ.
func (c planDevice) backwardKeys(r planRequest) ([3]kernels.Key, error) {
	p, bf16 := r.p, r.dt == BF16
	key := func(s kernels.Stage, m kernels.Mods, packed, ordered, causal bool) kernels.Key {
		return kernels.Key{Stage: s, Mods: m, Packed: packed, Ordered: ordered, HeadDim: p.D, Causal: causal, BF16: bf16}
	}
	packed := p.varlen != nil
	if r.op == opRawBackward || r.op == opBwdKernels {
		packed = false
	}
	mods := p.mods() && r.op == opBackward
	three := func(m kernels.Mods, packed, causal bool) [3]kernels.Key {
		return [3]kernels.Key{key(kernels.BwdPre, 0, packed, false, false),
			key(kernels.BwdDKDV, m, packed && m == 0, false, causal), key(kernels.BwdDQ, m, packed && m == 0, false, causal)}
	}
	single := func(m kernels.Mods, prePacked, ordered, causal bool) [3]kernels.Key {
		return [3]kernels.Key{key(kernels.BwdPre, 0, prePacked, false, false),
			key(kernels.BwdDKDVQ, m, false, ordered, causal), key(kernels.BwdDQConv, 0, false, false, false)}
	}
	if r.op == opRawBackward {
		return three(0, false, p.Causal), nil
	}
	if keys, ok := c.hopperBackward(single(0, false, p.Deterministic, p.Causal)); ok && r.op == opBackward && !mods && !packed {
		return keys, nil
	}
	_, pair := c.lookup(key(kernels.BwdDKDV, kernels.ModOn, false, false, false))
	_, fusedMod := c.lookup(key(kernels.BwdDKDVQ, kernels.ModOn, false, false, false))
	switch {
	case mods && c.rung != 0:
		f, v := p.modFeature()
		return [3]kernels.Key{}, &UnsupportedError{Backend: GPU, Feature: f, Value: v, Reason: fmt.Sprintf("the kernel ladder's rung %d has no score modifiers", c.rung)}
	case (mods || packed) && !pair && fusedMod:
		keys := single(kernels.ModOn, packed, p.Deterministic, false)
		if p.Deterministic {
			nk := p.Nk
			if packed {
				nk = maxSeqlen(p.varlen.CuSeqlensK)
			}
			v, ok := c.lookup(keys[1])
			if !ok {
				return keys, c.noOrderedPass(p.D)
			}
			if err := c.checkOrderedGrid(v, nk); err != nil {
				return keys, err
			}
		}
		return keys, nil
	case mods:
		return three(kernels.ModOn, packed, false), nil
	case packed:
		return three(0, true, p.Causal), nil
	}
	keys := single(0, false, p.Deterministic, p.Causal)
	v, ok := c.lookup(keys[1])
	// A heads-fastest grid's y is the key blocks (at most maxGridY).
	tooLong := ok && kernels.HeadsFastest(v) && (p.Nk+v.Bc-1)/v.Bc > c.maxGridY
	if !ok || tooLong {
		keys = three(0, false, p.Causal)
	}
	if _, ok3 := c.lookup(key(kernels.BwdDKDV, 0, false, false, p.Causal)); !ok3 {
		switch {
		case tooLong: // the head dim's only backward is that pass (D 256)
			return keys, c.checkOrderedGrid(v, p.Nk)
		case !ok && p.Deterministic:
			return keys, c.noOrderedPass(p.D)
		}
	}
	return keys, nil
}

// hopperBackward is keys, the single pass's three, on the Hopper backward
// (Arch 90) where the device runs it and the table has all three.
func (c planDevice) hopperBackward(keys [3]kernels.Key) ([3]kernels.Key, bool) {
	if !c.sm90a {
		return keys, false
	}
	for i := range keys {
		keys[i].Arch = kernels.SM90A
		if keys[i].Stage != kernels.BwdDKDVQ {
			keys[i].Causal = false
		}
		if _, ok := kernels.Lookup(keys[i]); !ok {
			return keys, false
		}
	}
	return keys, true
}

// checkOrderedGrid refuses an ordered single pass v whose grid y, nk keys
// in blocks of Bc, the device cannot express.
func (c planDevice) checkOrderedGrid(v kernels.Variant, nk int) error {
	if (nk+v.Bc-1)/v.Bc > c.maxGridY {
		return &UnsupportedError{Backend: GPU, Feature: "deterministic", Value: "true",
			Reason: fmt.Sprintf("the ordered single pass's grid takes at most %d key blocks of %d (Nk %d)", c.maxGridY, v.Bc, nk)}
	}
	return nil
}

// noOrderedPass is the error for Options.Deterministic at a head dim whose
// only backward is the single pass (D 256) where no ordered twin of it fits
// the device's shared memory (every sm_80+ part has one; the check keeps a
// table without it from reaching the three kernels it lacks).
func (c planDevice) noOrderedPass(headDim int) error {
	return &UnsupportedError{Backend: GPU, Feature: "deterministic", Value: "true",
		Reason: fmt.Sprintf("head dim %d has no ordered single pass within %s's %d bytes of shared memory per block", headDim, c.name, c.smemOptin)}
}

// decode plans a KV-cache decode: one kernel per call, split over the cache
// (decodeSplits) when B*Hkv alone would leave SMs idle.
func (c planDevice) decode(r planRequest) (plan, error) {
	p := r.p
	if err := checkDType(r.dt, c.path); err != nil {
		return plan{}, err
	}
	if c.rung != 0 {
		return plan{}, &UnsupportedError{Backend: GPU, Feature: kvEntry, Value: fmt.Sprintf("rung %d", c.rung),
			Reason: "the kernel ladder has no decode kernels"}
	}
	if err := c.checkProblem(p); err != nil {
		return plan{}, err
	}
	v, err := c.shipped(kernels.Key{Stage: kernels.Decode, HeadDim: p.D, BF16: r.dt == BF16})
	if err != nil {
		return plan{}, err
	}
	tiles := decodeRowTiles(p.Dims, v.Br)
	if tiles > 65535 {
		return plan{}, &UnsupportedError{Backend: GPU, Feature: "Nq*Hq/Hkv", Value: fmt.Sprint(p.Nq * p.Groups()),
			Reason: fmt.Sprintf("%d packed-row tiles of %d: at most 65535 (grid z)", tiles, v.Br)}
	}
	groups := p.B * p.Hkv * tiles // CTAs per split
	perSM := decodePerSM(c.smemPerSM, v.SmemBytes)
	pl := plan{kernels: []kernels.Variant{v}, splits: decodeSplits(groups, c.sms, perSM, decodeSpan(p), v.Bc, r.paged)}
	pl.mergeCTAs = decodeMergeCTAs(groups, pl.splits, min(v.Br, p.Nq*p.Groups()), p.D, 32*v.Warps, c.sms)
	pl.oPart, pl.lsePart, pl.counters = decodeWorkspace(p.Dims, pl.splits, groups)
	pl.cfgs = []cuda.LaunchConfig{{
		Grid:      [3]uint32{uint32(pl.splits), uint32(p.B * p.Hkv), uint32(tiles)},
		Block:     [3]uint32{uint32(32 * v.Warps), 1, 1},
		SharedMem: uint32(v.SmemBytes),
	}}
	return pl, nil
}

// checkProblem rejects problems whose launch grid the device cannot
// express and scales with which the kernels' float32 scores could overflow.
func (c planDevice) checkProblem(p problem) error {
	if m := maxGPUScale(p.D); p.Scale > m {
		return &UnsupportedError{Backend: GPU, Feature: "scale", Value: fmt.Sprint(p.Scale),
			Reason: fmt.Sprintf("at head dim %d the kernels' scores scale*log2(e)*q.k could exceed float32 for fp16 inputs above %.3g", p.D, m)}
	}
	return c.checkGrid(p.Dims, p.entry == kvEntry)
}

// checkPacked is checkGrid for packed sequences: one CTA row per
// (sequence, head).
func (c planDevice) checkPacked(p problem) error {
	if p.varlen == nil {
		return nil
	}
	return c.checkGrid(Dims{B: p.varlen.Seqs(), Nq: p.Nq, Nk: p.Nk, Hq: p.Hq, Hkv: p.Hkv, D: p.D}, false)
}

// checkGrid rejects problems whose launch grid the device cannot express:
// one CTA row (grid y) per (batch, head), or with kvHeads per (batch, kv
// head), as decode launches, whose query heads ride in a CTA as packed rows
// (their grid z is checked with the kernel's tile, decodeRowTiles).
func (c planDevice) checkGrid(dims Dims, kvHeads bool) error {
	rows, what, per := dims.B*dims.Hq, "B*Hq", "(batch, head)"
	if kvHeads {
		rows, what, per = dims.B*dims.Hkv, "B*Hkv", "(batch, kv head)"
	}
	if rows > c.maxGridY {
		return &UnsupportedError{Backend: GPU, Feature: what, Value: fmt.Sprint(rows),
			Reason: fmt.Sprintf("one CTA row per %s: at most %d on %s", per, c.maxGridY, c.name)}
	}
	if dims.Nq > math.MaxInt32 || dims.Nk > math.MaxInt32 {
		return &UnsupportedError{Backend: GPU, Feature: "sequence length", Value: fmt.Sprint(max(dims.Nq, dims.Nk)),
			Reason: "the kernels index rows with int32"}
	}
	return nil
}

// headDims lists, ascending, the head dims of the table at which a plan of
// req (its problem's D replaced) succeeds on c: the head-dim queries of a
// Device are plans, so they say what its calls do.
func (c planDevice) headDims(req func(d int) planRequest) []int {
	var ds []int
	for _, d := range tableHeadDims() {
		if _, err := planOf(c, req(d)); err == nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// tableHeadDims lists, ascending, every head dim of any kernel.
func tableHeadDims() []int {
	var ds []int
	for _, v := range append(kernels.Variants(), kernels.LadderVariants()...) {
		if !slices.Contains(ds, v.HeadDim) {
			ds = append(ds, v.HeadDim)
		}
	}
	slices.Sort(ds)
	return ds
}

// queryProblem is a problem of one row and key at head dim d, with the
// default scale, for the head-dim and kernel queries.
func queryProblem(d int, causal bool) problem {
	p, _ := (&Options{Causal: causal}).resolve(Dims{B: 1, Nq: 1, Nk: 1, Hq: 1, Hkv: 1, D: d})
	return p
}

// planDevice is what d's plans read of it; d.mu is held.
func (d *Device) planDevice() planDevice {
	c := planDevice{name: d.info.String(), path: d.path, sm90a: d.sm90a, smemOptin: d.smemOptin, smemPerSM: d.smemPerSM,
		sms: d.info.SMs, ctas: d.ctas, maxGridY: d.maxGridY, rung: d.rung}
	if r := d.nvrtcRungInUse(); r != nil {
		c.nvrtcRung = r.rung
		for _, ks := range r.build.Kernels {
			if k := r.funcs[ks.Symbol]; k != nil {
				c.nvrtc = append(c.nvrtc, k.v)
			}
		}
		if c.nvrtc == nil {
			c.nvrtc = []kernels.Variant{}
		}
	}
	return c
}

// nvrtcRungInUse is the edited rung Forward runs, nil for none; d.mu is held.
func (d *Device) nvrtcRungInUse() *nvrtcRung {
	if d.rung != 0 {
		return d.nvrtc[d.rung]
	}
	return d.nvrtc[len(ladder)]
}

// rungInUse is the ladder rung Forward runs (len(ladder): the shipped
// kernel); d.mu is held.
func (d *Device) rungInUse() int {
	if d.rung == 0 {
		return len(ladder)
	}
	return d.rung
}

// plan plans r on d and loads its kernels (loaded[i] runs pl.kernels[i]).
// What only loading tells is planned again: a Hopper cubin the driver
// refuses turns the Hopper kernels off for good (sm90aErr, which results
// report), and an NVRTC build made for another path or architecture (a
// ForcePath since) is compiled again first; d.mu is held.
func (d *Device) plan(r planRequest) (pl plan, loaded []*loadedKernel, err error) {
	for {
		if pl, err = planOf(d.planDevice(), r); err != nil {
			return plan{}, nil, err
		}
		if pl.nvrtc {
			changed, err := d.nvrtcSync()
			if err != nil {
				return plan{}, nil, err
			}
			if changed {
				continue
			}
		}
		if v := pl.kernels[0]; v.Arch == kernels.SM90A && d.mods[kernels.ImageSM90A] == nil {
			if _, err := d.module(v); err != nil {
				// A driver that cannot load sm_90a code: the sm_80 path runs
				// every call from now on, and results say why (reason).
				d.sm90a, d.sm90aErr = false, err
				continue
			}
		}
		break
	}
	vs := pl.kernels
	if pl.alt != nil {
		vs = append(vs[:len(vs):len(vs)], *pl.alt)
	}
	for i, v := range vs {
		var k *loadedKernel
		if i == 0 && pl.nvrtc {
			k = d.nvrtcRungInUse().funcs[v.Symbol]
		} else if k, err = d.load(v); err != nil {
			return plan{}, nil, err
		}
		loaded = append(loaded, k)
	}
	return pl, loaded, nil
}
