package flashattn

import (
	"context"
	"fmt"
	"math"
)

// Varlen describes a batch of sequences of different lengths packed without
// padding, as FlashAttention-2's varlen entry points take them: q is
// (1, total_q, Hq, D) and k, v are (1, total_k, Hkv, D), sequence s owning
// query rows [CuSeqlensQ[s], CuSeqlensQ[s+1]) and keys
// [CuSeqlensK[s], CuSeqlensK[s+1]). Both slices start at 0, never decrease,
// have one entry per sequence plus one and end at q's (k's) N. A sequence
// may be empty; one with queries and no key gives them output 0 and LSE
// -Inf. Every mask (Causal, Window) and ALiBi's distance is aligned to the
// bottom-right corner of each sequence's own score matrix.
type Varlen struct {
	CuSeqlensQ, CuSeqlensK []int
}

// Seqs is the number of sequences.
func (vl Varlen) Seqs() int { return len(vl.CuSeqlensQ) - 1 }

// seqDims are the dims of sequence s alone in packed problem d (B = 1).
func (vl Varlen) seqDims(d Dims, s int) Dims {
	d.Nq = vl.CuSeqlensQ[s+1] - vl.CuSeqlensQ[s]
	d.Nk = vl.CuSeqlensK[s+1] - vl.CuSeqlensK[s]
	return d
}

// check validates vl against the packed problem d.
func (vl Varlen) check(d Dims) error {
	if d.B != 1 {
		return &ShapeError{Arg: "q", Dim: "B", Got: d.B, Want: "== 1 (sequences packed along N, see Varlen)"}
	}
	if len(vl.CuSeqlensQ) != len(vl.CuSeqlensK) {
		return &DataError{Arg: "cu_seqlens_k", Reason: fmt.Sprintf("has %d entries, cu_seqlens_q %d: both want sequences + 1", len(vl.CuSeqlensK), len(vl.CuSeqlensQ))}
	}
	for _, c := range []struct {
		arg string
		cu  []int
		n   int
	}{{"cu_seqlens_q", vl.CuSeqlensQ, d.Nq}, {"cu_seqlens_k", vl.CuSeqlensK, d.Nk}} {
		if len(c.cu) < 2 {
			return &DataError{Arg: c.arg, Reason: fmt.Sprintf("has %d entries, want at least 2 (one sequence)", len(c.cu))}
		}
		if c.cu[0] != 0 {
			return &DataError{Arg: c.arg, Reason: fmt.Sprintf("starts at %d, want 0", c.cu[0])}
		}
		for s := 1; s < len(c.cu); s++ {
			if c.cu[s] < c.cu[s-1] {
				return &DataError{Arg: c.arg, Reason: fmt.Sprintf("decreases at entry %d (%d after %d)", s, c.cu[s], c.cu[s-1])}
			}
		}
		if last := c.cu[len(c.cu)-1]; last != c.n {
			return &DataError{Arg: c.arg, Reason: fmt.Sprintf("ends at %d, the packed tensor has N = %d", last, c.n)}
		}
	}
	return nil
}

// rows is the view of rows [r0, r0+n) of t (B = 1): a tensor of N = n
// sharing t's data and strides.
func (t *Tensor) rows(r0, n int) *Tensor {
	s := t.Shape
	s.N = n
	return &Tensor{Shape: s, Strides: t.Strides, Data: t.Data[t.Offset(0, r0, 0, 0):]}
}

// varlenEntry is the entry name of varlen problems (problem.entry).
const varlenEntry = "varlen"

// varlenCall is one varlen call after its checks: the packed problem (for
// the backend choice and the memory count) and the sequences.
type varlenCall struct {
	p  problem
	vl Varlen
}

// varlenBatch refuses a varlen tensor with B != 1 by its own name: the
// sequences are packed along N, so q, k and v each have one batch (the
// shapes' agreement is checked after).
func varlenBatch(arg string, b int) error {
	if b != 1 {
		return &ShapeError{Arg: arg, Dim: "B", Got: b, Want: "== 1 (varlen packs the sequences along N, see Varlen)"}
	}
	return nil
}

// resolveVarlen checks a varlen call's tensors and options.
func resolveVarlen(q, k, v *Tensor, vl Varlen, opts *Options) (varlenCall, error) {
	for i, t := range []*Tensor{q, k, v} {
		if t == nil {
			continue // DimsOf says so
		}
		if err := varlenBatch(argNames[i], t.Shape.B); err != nil {
			return varlenCall{}, err
		}
	}
	d, err := DimsOf(q, k, v)
	if err != nil {
		return varlenCall{}, err
	}
	if err := vl.check(d); err != nil {
		return varlenCall{}, err
	}
	if opts != nil && opts.Trace != nil {
		return varlenCall{}, &OptionError{Option: "Trace", Value: "set", Reason: "a varlen call records no trace"}
	}
	p, err := opts.resolve(d)
	if err != nil {
		return varlenCall{}, err
	}
	p.entry, p.varlen = varlenEntry, &vl
	return varlenCall{p: p, vl: vl}, nil
}

// seq is the problem of sequence s alone (its own bottom-right corner), and
// whether it has a key.
func (c varlenCall) seq(s int) (problem, bool) {
	p := c.p
	p.Dims, p.entry, p.varlen = c.vl.seqDims(c.p.Dims, s), "", nil
	return p, p.Nk > 0
}

// reserve refuses a call whose outputs, the sequences' LSEs gathered apart
// (at most the packed LSE's size) and the largest sequence's scratch
// exceed HostMemoryLimit.
func (c varlenCall) reserve(be Backend, im impl, o *Options, backward bool) error {
	what, out := "ForwardVarlen", floats(c.p.QShape().Numel(), c.p.LSELen())
	if backward {
		what, out = "BackwardVarlen", floats(c.p.QShape().Numel(), 2*c.p.KVShape().Numel())
	}
	var most float64
	for s := 0; s < c.vl.Seqs(); s++ {
		if p, ok := c.seq(s); ok && p.Nq > 0 {
			most = max(most, im.hostBytes(p, o, backward))
		}
	}
	return reserve(fmt.Sprintf("%s of %+v in %d sequences on %s", what, c.p.Dims, c.vl.Seqs(), be), out+floats(c.p.LSELen())+most)
}

// seqLSEs gathers each sequence's LSE out of the packed (1, Hq, total_q) lse
// (checked against the packed dims) and checks its -Inf rows against the
// sequence's own mask: only a row that sees no key may have one.
func (c varlenCall) seqLSEs(lse []float32) ([][]float32, error) {
	d, vl := c.p.Dims, c.vl
	seqLSE := make([][]float32, vl.Seqs())
	for s := range seqLSE {
		p, hasKey := c.seq(s)
		r0 := vl.CuSeqlensQ[s]
		sl := make([]float32, p.LSELen())
		for h := 0; h < d.Hq; h++ {
			copy(sl[p.LSEIndex(0, h, 0):][:p.Nq], lse[d.LSEIndex(0, h, r0):][:p.Nq])
		}
		if hasKey {
			if err := p.checkLSE(sl); err != nil {
				return nil, fmt.Errorf("flashattn: sequence %d (rows from %d): %w", s, r0, err)
			}
		}
		seqLSE[s] = sl
	}
	return seqLSE, nil
}

// ForwardVarlen is Forward on sequences packed as vl describes: q is
// (1, total_q, Hq, D), k and v (1, total_k, Hkv, D); Result.Out is
// (1, total_q, Hq, D) and Result.LSE (1, Hq, total_q), so the LSE of row r
// of query head h is LSE[h*total_q + r]. On the GPU the whole batch is one
// kernel launch (Device.ForwardVarlen after uploading q, k and v), windows,
// softcap and ALiBi too.
func ForwardVarlen(q, k, v *Tensor, vl Varlen, opts *Options) (*Result, error) {
	return ForwardVarlenContext(context.Background(), q, k, v, vl, opts)
}

// ForwardVarlenContext is ForwardVarlen that stops early once ctx is done,
// as ForwardContext.
func ForwardVarlenContext(ctx context.Context, q, k, v *Tensor, vl Varlen, opts *Options) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flashattn: ForwardVarlen: %w", err)
	}
	c, err := resolveVarlen(q, k, v, vl, opts)
	if err != nil {
		return nil, err
	}
	be, reason, im, err := pick(c.p, opts, false, q, k, v)
	if err != nil {
		return nil, err
	}
	if g, ok := im.(gpuImpl); ok { // every sequence in one launch
		res, err := g.dev.ForwardVarlenHost(q, k, v, vl, opts)
		return res, lostDefault(g.dev, err)
	}
	if err := c.reserve(be, im, opts, false); err != nil {
		return nil, err
	}
	d := c.p.Dims
	out, lse := newOutput(d.QShape()), newBuffer(d.LSELen())
	for s := 0; s < vl.Seqs(); s++ {
		p, hasKey := c.seq(s)
		r0 := vl.CuSeqlensQ[s]
		if p.Nq == 0 {
			continue
		}
		so := out.rows(r0, p.Nq)
		if !hasKey { // rows that see no key
			for i := 0; i < p.Nq; i++ {
				for h := 0; h < d.Hq; h++ {
					clear(so.Row(0, i, h))
					lse[d.LSEIndex(0, h, r0+i)] = float32(math.Inf(-1))
				}
			}
			continue
		}
		sl := make([]float32, p.LSELen())
		k0 := vl.CuSeqlensK[s]
		if err := im.forward(ctx, p, q.rows(r0, p.Nq), k.rows(k0, p.Nk), v.rows(k0, p.Nk), opts, so, sl); err != nil {
			return nil, err
		}
		for h := 0; h < d.Hq; h++ {
			copy(lse[d.LSEIndex(0, h, r0):][:p.Nq], sl[p.LSEIndex(0, h, 0):][:p.Nq])
		}
	}
	return &Result{Dims: d, Out: out, LSE: lse, Backend: be, Reason: reason}, nil
}

// BackwardVarlen is Backward on sequences packed as vl describes, from
// ForwardVarlen's output and LSE; dQ is (1, total_q, Hq, D), dK and dV
// (1, total_k, Hkv, D). On the GPU the whole batch is one set of three
// launches (Device.BackwardVarlen after uploading the tensors; the
// deterministic three-kernel backward), windows, softcap and ALiBi too at
// head dims 32-128; at D 256 the single pass (Options.Deterministic: its
// ordered twin) on sm_80+ GPUs.
func BackwardVarlen(q, k, v, out, dOut *Tensor, lse []float32, vl Varlen, opts *Options) (*Grads, error) {
	return BackwardVarlenContext(context.Background(), q, k, v, out, dOut, lse, vl, opts)
}

// BackwardVarlenContext is BackwardVarlen that stops early once ctx is
// done, as ForwardContext.
func BackwardVarlenContext(ctx context.Context, q, k, v, out, dOut *Tensor, lse []float32, vl Varlen, opts *Options) (*Grads, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flashattn: BackwardVarlen: %w", err)
	}
	c, err := resolveVarlen(q, k, v, vl, opts)
	if err != nil {
		return nil, err
	}
	d := c.p.Dims
	if err := checkOutputs(d, out, dOut); err != nil {
		return nil, err
	}
	if _, err := d.checkLSE(lse); err != nil {
		return nil, err
	}
	be, reason, im, err := pick(c.p, opts, true, q, k, v, out, dOut)
	if err != nil {
		return nil, err
	}
	if g, ok := im.(gpuImpl); ok { // every sequence in one set of launches
		res, err := g.dev.BackwardVarlenHost(q, k, v, out, dOut, lse, vl, opts)
		return res, lostDefault(g.dev, err)
	}
	if err := c.reserve(be, im, opts, true); err != nil {
		return nil, err
	}
	seqLSE, err := c.seqLSEs(lse)
	if err != nil {
		return nil, err
	}
	g := &Grads{DQ: newOutput(d.QShape()), DK: newOutput(d.KVShape()), DV: newOutput(d.KVShape()), Backend: be, Reason: reason}
	for s := 0; s < vl.Seqs(); s++ {
		p, hasKey := c.seq(s)
		r0, k0 := vl.CuSeqlensQ[s], vl.CuSeqlensK[s]
		if p.Nq == 0 || !hasKey { // no pair of query and key: every gradient 0
			for _, z := range []*Tensor{g.DQ.rows(r0, p.Nq), g.DK.rows(k0, p.Nk), g.DV.rows(k0, p.Nk)} {
				clear(z.Data[:z.Shape.N*z.Strides[1]])
			}
			continue
		}
		qs, ks, vs := q.rows(r0, p.Nq), k.rows(k0, p.Nk), v.rows(k0, p.Nk)
		if err := im.backward(ctx, p, qs, ks, vs, out.rows(r0, p.Nq), dOut.rows(r0, p.Nq), seqLSE[s], opts,
			g.DQ.rows(r0, p.Nq), g.DK.rows(k0, p.Nk), g.DV.rows(k0, p.Nk)); err != nil {
			return nil, err
		}
	}
	return g, nil
}
