package flashattn

import "slices"

// SupportedHeadDims lists, ascending, the head dims at which calls op of
// element type dt with options o run on this device, on the kernel path
// in use (ForcePath) and the ladder rung (UseRung): nil where none do (bf16
// on the Turing path, a modifier on a rung, an op that is none of the
// constants). Of o only what picks the kernels counts: Deterministic, and
// whether a Window, Softcap or ALiBi is set (the modified kernels); the
// options are checked by the call, not here. The kernel tables behind it
// need no GPU: KernelTable, BackwardKernelTable, HopperHeadDims.
//
// What answers: OpForward and OpRawForward the forward kernels (a rung's
// while one is in use; the raw plans run no modifiers), OpVarlenForward
// the varlen or modified forward, OpKVCache the decode kernels,
// OpBackward the single pass where it fits the device (with Deterministic
// its ordered twin) or the three kernels, with modifiers the modified pair
// or single pass, OpVarlenBackward those of the packed sequences,
// OpRawBackward the three kernels, and OpForwardBackward the head dims of
// both passes.
func (d *Device) SupportedHeadDims(op Op, dt DType, o *Options) []int {
	if d == nil || checkOp(op) != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path == 0 || checkDType(dt, d.path) != nil {
		return nil // a zero Device, or no kernels of dt on this path
	}
	if op == OpForwardBackward {
		fwd := d.headDims(OpForward, dt, o)
		return slices.DeleteFunc(d.headDims(OpBackward, dt, o), func(hd int) bool { return !slices.Contains(fwd, hd) })
	}
	return d.headDims(op, dt, o)
}

// headDims is SupportedHeadDims for one pass's op and a dtype the path
// has: the head dims at which that call's plan succeeds on a problem of one
// row with o's kernel-picking options (planHeadDims); d.mu is held.
func (d *Device) headDims(op Op, dt DType, o *Options) []int {
	mods, softcap, alibi := o.scoreMods()
	det := o != nil && o.Deterministic
	return d.planHeadDims(op == OpRawForward, func(hd int) planRequest {
		p := queryProblem(hd, false)
		p.Deterministic = det
		if mods {
			p.Left = 1
		}
		if softcap {
			p.Softcap = 1
		}
		if alibi {
			p.ALiBi = []float64{0.5}
		}
		r := planRequest{p: p, dt: dt}
		switch op {
		case OpForward:
			r.op = opForward
		case OpRawForward:
			r.op = opRawForward
		case OpVarlenForward:
			r.op = opForward
			r.p.entry, r.p.varlen = varlenEntry, &Varlen{CuSeqlensQ: []int{0, 1}, CuSeqlensK: []int{0, 1}}
		case OpVarlenBackward:
			r.op = opBackward
			r.p.entry, r.p.varlen = varlenEntry, &Varlen{CuSeqlensQ: []int{0, 1}, CuSeqlensK: []int{0, 1}}
		case OpKVCache:
			r.op = opDecode
			r.p.entry = kvEntry
		case OpBackward:
			r.op = opBackward
		case OpRawBackward:
			r.op = opRawBackward
		}
		return r
	})
}

// scoreMods reports, without the dims, whether o asks for the modified
// kernels (a window that bounds a side beyond the causal mask, a softcap,
// ALiBi), and for which of softcap and ALiBi.
func (o *Options) scoreMods() (mods, softcap, alibi bool) {
	if o == nil {
		return false, false, false
	}
	softcap, alibi = o.Softcap != 0, o.ALiBi != nil
	window := o.Window != nil && (o.Window.Left >= 0 || o.Window.Right > 0 && !o.Causal)
	return window || softcap || alibi, softcap, alibi
}

// Kernels returns the kernels a call op of problem dims, element type dt
// and options o runs on this device, in launch order, loading them on
// first use: the forward's one (OpForward, OpVarlenForward, OpKVCache,
// OpRawForward), the backward's three (pre, then dK/dV and dQ, or the
// single pass and its dQ convert kernel), or both for OpForwardBackward.
// Each comes with its tile, registers, shared memory and occupancy here
// (KernelStats; NVRTC set for a rung compiled by LoadRungSource). A call
// the device cannot run is the error that call would return: an
// *UnsupportedError that says why (a head dim without kernels lists the
// ones there are), an *OptionError for o.
//
// dims are those of the call: for OpVarlenForward and OpVarlenBackward the
// packed tensors' (B 1), taken as one sequence; for OpKVCache q's (B, Nq,
// Hq, D) against a contiguous cache of Nk entries per sequence.
func (d *Device) Kernels(op Op, dims Dims, dt DType, o *Options) ([]KernelStats, error) {
	if err := checkOp(op); err != nil {
		return nil, err
	}
	var ks []*loadedKernel
	switch op {
	case OpRawForward: // the plan checks and loads what its Enqueue runs
		f, err := d.NewRawForward(dims, dt, o)
		if err != nil {
			return nil, err
		}
		ks = []*loadedKernel{f.kern}
	case OpRawBackward:
		b, err := d.NewRawBackward(dims, dt, o)
		if err != nil {
			return nil, err
		}
		ks = b.ks[:]
	}
	p, err := opProblem(op, dims, Varlen{}, 0, o)
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if ks != nil && !d.shipped(ks[0].mod) {
		return nil, &DataError{Arg: "plan", Reason: "the device's kernels were reloaded (ForcePath) while the plan was made: ask again"}
	}
	if ks == nil {
		if ks, err = d.opKernels(op, p, dt); err != nil {
			return nil, err
		}
	}
	out := make([]KernelStats, len(ks))
	for i, k := range ks {
		if out[i], err = d.stats(k); err != nil { // NVRTC set for a LoadRungSource module
			return nil, err
		}
	}
	return out, nil
}

// opProblem is the problem of a call op of dims with options o: for the
// varlen ops packed as vl (one sequence when vl is zero), for OpKVCache
// against a cache of dims.Nk entries per sequence, contiguous for pageSize
// 0, else in blocks of pageSize handed out in a shuffled order (kvBench).
func opProblem(op Op, dims Dims, vl Varlen, pageSize int, o *Options) (problem, error) {
	if err := dims.Validate(); err != nil {
		return problem{}, err
	}
	switch op {
	case OpKVCache:
		p, _, _, err := kvBench(dims, pageSize, o)
		return p, err
	case OpVarlenForward, OpVarlenBackward:
		if vl.CuSeqlensQ == nil && vl.CuSeqlensK == nil {
			vl = Varlen{CuSeqlensQ: []int{0, dims.Nq}, CuSeqlensK: []int{0, dims.Nk}}
		}
		if err := vl.check(dims); err != nil {
			return problem{}, err
		}
		p, err := o.resolve(dims)
		p.entry, p.varlen = varlenEntry, &vl
		return p, err
	}
	return o.resolve(dims)
}

// opKernels plans and loads the kernels of a call op of p in element type
// dt, in launch order (a forward's, then a backward's); the raw ops are
// their plans' (Kernels), not this; d.mu is held.
func (d *Device) opKernels(op Op, p problem, dt DType) ([]*loadedKernel, error) {
	if err := checkDType(dt, d.path); err != nil {
		return nil, err
	}
	if op == OpRawForward || op == OpRawBackward {
		return nil, &OptionError{Option: "op", Value: op.String(), Reason: "a raw op's kernels are its plan's (NewRawForward, NewRawBackward)"}
	}
	var ks []*loadedKernel
	add := func(r planRequest) error {
		_, loaded, err := d.plan(r)
		ks = append(ks, loaded...)
		return err
	}
	switch op {
	case OpKVCache:
		if err := add(planRequest{op: opDecode, p: p, dt: dt}); err != nil {
			return nil, err
		}
		return ks, nil
	case OpForward, OpVarlenForward, OpForwardBackward:
		if err := add(planRequest{op: opForward, p: p, dt: dt}); err != nil {
			return nil, err
		}
	}
	if op.backward() {
		if err := add(planRequest{op: opBackward, p: p, dt: dt}); err != nil {
			return nil, err
		}
	}
	return ks, nil
}
