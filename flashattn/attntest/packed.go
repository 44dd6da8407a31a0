package attntest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// The cases of the sibling entry points: packed sequences (varlen) and
// decoding against a KV cache. Each sequence (batch) is checked against the
// truth of that sequence alone, with the same rules as Case.

// VarlenCase is a batch of sequences packed without padding. Case holds
// the heads, head dim, options and seed (its B, Nq, Nk and Layout are
// unused); sequence s has LensQ[s] query rows and LensK[s] keys.
type VarlenCase struct {
	Case
	LensQ, LensK []int
}

// VarlenCases covers empty sequences, sequences with queries and no key
// and with keys and no query, Nq != Nk, lengths across several 64-blocks,
// GQA, and every mask and score modifier; the d128 ones odd lengths across
// several 128-row blocks, the longest sequence not the first.
func VarlenCases() []VarlenCase {
	lq, lk := []int{5, 0, 17, 67, 1, 3, 0, 130}, []int{5, 3, 30, 67, 0, 1, 0, 129}
	cs := []VarlenCase{
		{Case{Name: "varlen-gqa2"}, lq, lk},
		{Case{Name: "varlen-causal-gqa2", Causal: true}, lq, lk},
		{Case{Name: "varlen-window-l2-r3", Window: &flashattn.Window{Left: 2, Right: 3}}, lq, lk},
		{Case{Name: "varlen-all-mods-causal", Causal: true, Window: &flashattn.Window{Left: 8, Right: -1}, Softcap: 4, ALiBi: true}, lq, lk},
	}
	for i := range cs {
		cs[i].Hq, cs[i].Hkv, cs[i].D = 4, 2, 32
		cs[i].Seed = uint64(50000 + 1000*i)
	}
	lq, lk = []int{77, 0, 301, 129, 2}, []int{77, 5, 257, 200, 0}
	for i, causal := range []bool{false, true} {
		c := VarlenCase{Case{Name: "varlen-d128-gqa3", Causal: causal, Hq: 6, Hkv: 2, D: 128, Seed: uint64(60000 + 1000*i)}, lq, lk}
		if causal {
			c.Name = "varlen-causal-d128-gqa3"
		}
		cs = append(cs, c)
	}
	// The modifiers at the tiles' sizes, one per kernel form: runs of clean
	// key blocks between the masked ones (the peeled D64 kernels), ALiBi's
	// column-bias form (D96, D128, ALiBi alone), all three unpeeled (D128),
	// Gemma 2's sliding window and softcap on D256's single-buffered tile.
	lq, lk = []int{300, 0, 129, 513, 7}, []int{260, 9, 200, 513, 0}
	cs = append(cs,
		VarlenCase{Case{Name: "varlen-d64-window-l100-r20-softcap15", Window: &flashattn.Window{Left: 100, Right: 20}, Softcap: 15,
			Hq: 4, Hkv: 2, D: 64, Seed: 62000}, lq, lk},
		VarlenCase{Case{Name: "varlen-d128-alibi-causal-gqa3", Causal: true, ALiBi: true, Hq: 6, Hkv: 2, D: 128, Seed: 63000}, lq, lk},
		VarlenCase{Case{Name: "varlen-d128-window-l200-softcap20-alibi", Window: &flashattn.Window{Left: 200, Right: -1}, Softcap: 20,
			ALiBi: true, Hq: 2, Hkv: 2, D: 128, Seed: 64000}, lq, lk},
		VarlenCase{Case{Name: "varlen-d96-alibi-gqa3", ALiBi: true, Hq: 3, Hkv: 1, D: 96, Seed: 65000}, lq, lk},
		VarlenCase{Case{Name: "varlen-d256-causal-window-l90-softcap30", Causal: true, Window: &flashattn.Window{Left: 90, Right: -1}, Softcap: 30,
			Hq: 4, Hkv: 2, D: 256, Seed: 66000}, lq, lk},
		// D 64 plain and causal on the same lengths: tiles of Br 192 (the Hopper forward's) across
		// sequences of 7 to 513 rows.
		VarlenCase{Case{Name: "varlen-d64-gqa2", Hq: 4, Hkv: 2, D: 64, Seed: 68000}, lq, lk},
		VarlenCase{Case{Name: "varlen-causal-d64-gqa2", Causal: true, Hq: 4, Hkv: 2, D: 64, Seed: 69000}, lq, lk},
		// D 256 without modifiers: the GPU runs its backward on the modified single pass too.
		VarlenCase{Case{Name: "varlen-causal-d256-gqa2", Causal: true, Hq: 4, Hkv: 2, D: 256, Seed: 67000}, []int{77, 0, 150, 33}, []int{90, 5, 130, 0}})
	return cs
}

// Cu returns the cumulative lengths of lens (a Varlen's CuSeqlens).
func Cu(lens []int) []int {
	cu := []int{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	return cu
}

// Varlen is the case's packing.
func (c VarlenCase) Varlen() flashattn.Varlen {
	return flashattn.Varlen{CuSeqlensQ: Cu(c.LensQ), CuSeqlensK: Cu(c.LensK)}
}

// Inputs builds the packed q, k, v and dOut, (1, total, H, D).
func (c VarlenCase) Inputs() (q, k, v, dOut *flashattn.Tensor) {
	vl := c.Varlen()
	tq, tk := vl.CuSeqlensQ[vl.Seqs()], vl.CuSeqlensK[vl.Seqs()]
	qs, kvs := flashattn.Shape{B: 1, N: tq, H: c.Hq, D: c.D}, flashattn.Shape{B: 1, N: tk, H: c.Hkv, D: c.D}
	return flashattn.Random(qs, c.Seed), flashattn.Random(kvs, c.Seed+1), flashattn.Random(kvs, c.Seed+2), flashattn.Random(qs, c.Seed+3)
}

// KVCase is decoding against a KV cache: Case holds B, Nq (the new rows),
// heads, head dim, options and seed (its Nk and Layout are unused);
// SeqLens are the cache lengths, the cache holding Ncache entries per
// batch, paged in blocks of BlockSize when BlockSize > 0. Append > 0 makes
// it an in-place append (ForwardKVCacheAppend) of that many new entries per
// sequence: SeqLens are then the lengths before it.
type KVCase struct {
	Case
	SeqLens   []int
	Ncache    int
	BlockSize int
	Append    int
}

// KVCases covers Nq = 1 and Nq > 1, an empty cache and a full one, a cache
// length on a block boundary, contiguous and paged caches, GQA and MQA, and
// the masks and score modifiers.
func KVCases() []KVCase {
	lens := []int{37, 0, 100, 16}
	cs := []KVCase{
		{Case{Name: "decode-Nq1", Nq: 1}, lens, 100, 0, 0},
		{Case{Name: "decode-Nq1-paged16", Nq: 1}, lens, 100, 16, 0},
		{Case{Name: "decode-Nq5-causal-paged32", Nq: 5, Causal: true}, lens, 100, 32, 0},
		{Case{Name: "decode-Nq5-causal-window-softcap-alibi", Nq: 5, Causal: true, Window: &flashattn.Window{Left: 20, Right: -1}, Softcap: 6, ALiBi: true}, lens, 100, 0, 0},
		{Case{Name: "decode-Nq2-window-alibi-paged16", Nq: 2, Window: &flashattn.Window{Left: 9, Right: 0}, ALiBi: true}, lens, 100, 16, 0},
		// What the GPU decode kernels tile: several key blocks per sequence
		// (64-128 keys), pages that straddle a block (48), a GQA group of 8
		// packed with Nq into one 16-row tile or spilling over several
		// (Nq 16 x 4 = 64 rows), a cache length one past a block, causal
		// rows that see no key (SeqLens 1 < Nq).
		{Case{Name: "decode-Nq1-gqa8-d128", Nq: 1, Hq: 16, Hkv: 2, D: 128}, []int{300, 1, 517, 0, 129}, 520, 0, 0},
		{Case{Name: "decode-Nq2-gqa8-d64-paged48", Nq: 2, Hq: 8, Hkv: 1, D: 64}, []int{300, 1, 517, 0, 129}, 520, 48, 0},
		{Case{Name: "decode-Nq16-causal-gqa4-d64-paged16", Nq: 16, Causal: true, Hq: 8, Hkv: 2, D: 64}, []int{200, 1, 65, 0}, 200, 16, 0},
		{Case{Name: "decode-Nq3-causal-mqa-d96", Nq: 3, Causal: true, Hq: 6, Hkv: 1, D: 96}, []int{257, 2, 130}, 260, 0, 0},
		// The modifiers at the kernels' tiles: a window that skips key
		// blocks and leaves unmasked ones inside it, per-row window edges
		// within one packed tile (4 query rows x 4 heads), a window open to
		// the right, softcap and ALiBi on rows of different heads and tiles.
		{Case{Name: "decode-Nq1-gqa8-d128-window100-softcap30-alibi", Nq: 1, Hq: 16, Hkv: 2, D: 128, Window: &flashattn.Window{Left: 100, Right: -1}, Softcap: 30, ALiBi: true}, []int{300, 1, 517, 0, 129}, 520, 0, 0},
		{Case{Name: "decode-Nq4-causal-window37-gqa4-d64-paged16", Nq: 4, Causal: true, Window: &flashattn.Window{Left: 37, Right: -1}, Hq: 8, Hkv: 2, D: 64}, []int{200, 1, 65, 0}, 200, 16, 0},
		{Case{Name: "decode-Nq3-window5-2-softcap10-mqa-d96", Nq: 3, Window: &flashattn.Window{Left: 5, Right: 2}, Softcap: 10, Hq: 6, Hkv: 1, D: 96}, []int{257, 2, 130}, 260, 0, 0},
		{Case{Name: "decode-Nq16-alibi-gqa4-d64", Nq: 16, ALiBi: true, Hq: 8, Hkv: 2, D: 64}, []int{200, 1, 65, 0}, 200, 0, 0},
		// In-place append: a sequence filled to its last entry, an empty
		// one, new entries crossing a page, the GPU's head dims.
		{Case{Name: "append1-Nq1", Nq: 1}, []int{37, 0, 99, 15}, 100, 0, 1},
		{Case{Name: "append1-Nq1-paged16", Nq: 1}, []int{37, 0, 99, 15}, 100, 16, 1},
		{Case{Name: "append5-Nq5-causal-paged32", Nq: 5, Causal: true}, []int{30, 0, 95, 16}, 100, 32, 5},
		{Case{Name: "append3-Nq3-causal-window-alibi", Nq: 3, Causal: true, Window: &flashattn.Window{Left: 20, Right: -1}, ALiBi: true}, []int{30, 0, 95}, 100, 0, 3},
		{Case{Name: "append2-Nq2-gqa8-d128", Nq: 2, Hq: 16, Hkv: 2, D: 128}, []int{300, 1, 518, 0, 129}, 520, 0, 2},
		{Case{Name: "append16-Nq16-causal-gqa4-d64-paged48", Nq: 16, Causal: true, Hq: 8, Hkv: 2, D: 64}, []int{40, 0, 184}, 200, 48, 16},
		// D 256 (Gemma 2: a sliding window and softcap), whose decode tiles
		// take 32-key blocks (one per page of 32) and, on the Turing path,
		// 8 packed rows: 8 rows fill one such tile, 20 (Nq 5 x 4) spill over
		// three, and an append of 9 rows (a prefill chunk) over five.
		{Case{Name: "decode-Nq2-gqa4-d256-window100-softcap50-paged32", Nq: 2, Hq: 8, Hkv: 2, D: 256, Window: &flashattn.Window{Left: 100, Right: -1}, Softcap: 50}, []int{300, 1, 517, 0, 129}, 520, 32, 0},
		{Case{Name: "decode-Nq5-causal-alibi-gqa4-d256-paged16", Nq: 5, Causal: true, ALiBi: true, Hq: 8, Hkv: 2, D: 256}, []int{200, 1, 65, 0}, 200, 16, 0},
		{Case{Name: "append9-Nq9-causal-window30-gqa4-d256", Nq: 9, Causal: true, Window: &flashattn.Window{Left: 30, Right: -1}, Hq: 8, Hkv: 2, D: 256}, []int{40, 0, 184}, 200, 0, 9},
	}
	for i := range cs {
		c := &cs[i]
		c.B = len(c.SeqLens)
		if c.Hq == 0 {
			c.Hq, c.Hkv, c.D = 4, 2, 32
		}
		c.Seed = uint64(60000 + 1000*i)
	}
	return cs
}

// NewEntries builds an append case's new keys and values (B, Append, Hkv, D).
func (c KVCase) NewEntries() (kNew, vNew *flashattn.Tensor) {
	s := flashattn.Shape{B: c.B, N: c.Append, H: c.Hkv, D: c.D}
	return flashattn.Random(s, c.Seed+3), flashattn.Random(s, c.Seed+4)
}

// Inputs builds q and the cache: contiguous kc, vc (B, Ncache, Hkv, D),
// and the k, v and KVCache to pass (a paged copy, blocks in a shuffled
// order and the table one block longer than the cache, when paged).
func (c KVCase) Inputs() (q, kc, vc, k, v *flashattn.Tensor, cache flashattn.KVCache) {
	q = flashattn.Random(flashattn.Shape{B: c.B, N: c.Nq, H: c.Hq, D: c.D}, c.Seed)
	kc = flashattn.Random(flashattn.Shape{B: c.B, N: c.Ncache, H: c.Hkv, D: c.D}, c.Seed+1)
	vc = flashattn.Random(kc.Shape, c.Seed+2)
	cache = flashattn.KVCache{SeqLens: c.SeqLens}
	if c.BlockSize == 0 {
		return q, kc, vc, kc, vc, cache
	}
	perRow := (c.Ncache+c.BlockSize-1)/c.BlockSize + 1
	blocks := c.B * perRow
	k = flashattn.New(flashattn.Shape{B: blocks, N: c.BlockSize, H: c.Hkv, D: c.D})
	v = flashattn.New(k.Shape)
	pool := rand.New(rand.NewPCG(c.Seed, 7)).Perm(blocks)
	cache.BlockSize, cache.BlockTable = c.BlockSize, make([][]int, c.B)
	for b := range cache.BlockTable {
		row := pool[b*perRow : (b+1)*perRow]
		cache.BlockTable[b] = row
		for n := 0; n < c.Ncache; n++ {
			for h := 0; h < c.Hkv; h++ {
				for x := 0; x < c.D; x++ {
					k.Set(row[n/c.BlockSize], n%c.BlockSize, h, x, kc.At(b, n, h, x))
					v.Set(row[n/c.BlockSize], n%c.BlockSize, h, x, vc.At(b, n, h, x))
				}
			}
		}
	}
	return q, kc, vc, k, v, cache
}

// Rows copies rows [r0, r0+n) of batch b of t into a dense (1, n, H, D) tensor.
func Rows(t *flashattn.Tensor, b, r0, n int) *flashattn.Tensor {
	s := t.Shape
	s.B, s.N = 1, n
	c := flashattn.New(s)
	for i := 0; i < n; i++ {
		for h := 0; h < s.H; h++ {
			for x := 0; x < s.D; x++ {
				c.Set(0, i, h, x, t.At(b, r0+i, h, x))
			}
		}
	}
	return c
}

// RunVarlen runs every VarlenCase against b's ForwardVarlen and
// BackwardVarlen (skipped when b has none; a Plain backend runs both
// without score modifiers, and must refuse the others unless ModsVarlen:
// then it runs them forward; each runs backward at VarlenBackward's head dims).
func RunVarlen(t *testing.T, b Backend) { RunVarlenCases(t, b, VarlenCases()) }

// VarlenCasesAt is VarlenCases at head dim d, as CasesAt is Cases.
func VarlenCasesAt(d int) []VarlenCase {
	return atHeadDim(VarlenCases(), d, func(c *VarlenCase) *Case { return &c.Case })
}

// RunVarlenCases runs the varlen cases cs against b, as RunVarlen does VarlenCases.
func RunVarlenCases(t *testing.T, b Backend, cs []VarlenCase) {
	for _, c := range cs {
		t.Run(c.Name, func(t *testing.T) {
			if b.ForwardVarlen == nil {
				t.Skipf("%s has no ForwardVarlen", b.Name)
			}
			q, k, v, dO := c.Inputs()
			vl, o := c.Varlen(), c.Options()
			if !b.runsVarlen(c.Case) {
				_, err := b.ForwardVarlen(q, k, v, vl, o)
				expectUnsupported(t, "ForwardVarlen", c.Case, err)
				return
			}
			res, err := b.ForwardVarlen(q, k, v, vl, o)
			if err != nil {
				t.Fatalf("%s: ForwardVarlen(%v): %v", b.Name, c.Case, err)
			}
			var g *flashattn.Grads
			if b.BackwardVarlen != nil && b.varlenForwardOnly(c.Case) {
				_, err := b.BackwardVarlen(q, k, v, res.Out, dO, res.LSE, vl, o)
				expectUnsupported(t, "BackwardVarlen", c.Case, err)
			} else if b.BackwardVarlen != nil {
				if g, err = b.BackwardVarlen(q, k, v, res.Out, dO, res.LSE, vl, o); err != nil {
					t.Fatalf("%s: BackwardVarlen(%v): %v", b.Name, c.Case, err)
				}
			}
			total := q.Shape.N
			var seqs []*seqCheck
			for s := 0; s < vl.Seqs(); s++ {
				r0, nq, k0, nk := vl.CuSeqlensQ[s], c.LensQ[s], vl.CuSeqlensK[s], c.LensK[s]
				var lse []float32
				for h := 0; h < c.Hq; h++ {
					lse = append(lse, res.LSE[h*total+r0:][:nq]...)
				}
				got := &flashattn.Result{Out: Rows(res.Out, 0, r0, nq), LSE: lse}
				var gs *flashattn.Grads
				if g != nil {
					gs = &flashattn.Grads{DQ: Rows(g.DQ, 0, r0, nq), DK: Rows(g.DK, 0, k0, nk), DV: Rows(g.DV, 0, k0, nk)}
				}
				seqs = append(seqs, newSeqCheck(b.Precision, c.Case, s, Rows(q, 0, r0, nq), Rows(k, 0, k0, nk), Rows(v, 0, k0, nk), Rows(dO, 0, r0, nq), got, gs))
			}
			checkSeqs(t, seqs)
		})
	}
}

// RunKVCache runs every KVCase against b's ForwardKVCache (skipped when b
// has none; a Plain backend runs the cases without score modifiers and
// must refuse the others).
func RunKVCache(t *testing.T, b Backend) {
	for _, c := range KVCases() {
		t.Run(c.Name, func(t *testing.T) {
			if b.ForwardKVCache == nil || c.Append > 0 && b.ForwardKVCacheAppend == nil {
				t.Skipf("%s has no ForwardKVCache or ForwardKVCacheAppend", b.Name)
			}
			q, kc, vc, k, v, cache := c.Inputs()
			o := c.Options()
			if !b.supportsKVCase(c.Case) {
				var err error
				if c.Append > 0 {
					kNew, vNew := c.NewEntries()
					_, err = b.ForwardKVCacheAppend(q, kNew, vNew, k, v, cache, o)
				} else {
					_, err = b.ForwardKVCache(q, k, v, cache, o)
				}
				expectUnsupported(t, "ForwardKVCache", c.Case, err)
				return
			}
			if c.Append > 0 {
				runAppend(t, b, c)
				return
			}
			res, err := b.ForwardKVCache(q, k, v, cache, o)
			if err != nil {
				t.Fatalf("%s: ForwardKVCache(%v): %v", b.Name, c.Case, err)
			}
			d := res.Dims
			var seqs []*seqCheck
			for bi, n := range c.SeqLens {
				got := &flashattn.Result{Out: Rows(res.Out, bi, 0, c.Nq), LSE: res.LSE[d.LSEIndex(bi, 0, 0):][:c.Hq*c.Nq]}
				seqs = append(seqs, newSeqCheck(b.Precision, c.Case, bi, Rows(q, bi, 0, c.Nq), Rows(kc, bi, 0, n), Rows(vc, bi, 0, n), nil, got, nil))
			}
			checkSeqs(t, seqs)
		})
	}
}

// runAppend runs an append case: the cache b returns must hold the new
// entries at each sequence's length and its other entries unchanged (held
// to b's precision: a GPU backend's cache went through fp16), and the
// result must be the truth over the grown sequences.
func runAppend(t *testing.T, b Backend, c KVCase) {
	q, kc, vc, k, v, cache := c.Inputs()
	kNew, vNew := c.NewEntries()
	res, err := b.ForwardKVCacheAppend(q, kNew, vNew, k, v, cache, c.Options())
	if err != nil {
		t.Fatalf("%s: ForwardKVCacheAppend(%v): %v", b.Name, c.Case, err)
	}
	if !slices.Equal(cache.SeqLens, c.SeqLens) {
		t.Errorf("the call changed SeqLens to %v (want %v: the caller adds Append)", cache.SeqLens, c.SeqLens)
	}
	// want: kc, vc with the new entries written at each sequence's length.
	want := [2]*flashattn.Tensor{kc.Clone(), vc.Clone()}
	for bi, n := range c.SeqLens {
		for i := 0; i < c.Append; i++ {
			for h := 0; h < c.Hkv; h++ {
				for x := 0; x < c.D; x++ {
					want[0].Set(bi, n+i, h, x, kNew.At(bi, i, h, x))
					want[1].Set(bi, n+i, h, x, vNew.At(bi, i, h, x))
				}
			}
		}
	}
	u, floor := b.Precision.unitRoundoff(), 0.0
	if b.Precision != FP32 {
		floor = 0x1p-24 // fp16's subnormal spacing
	}
	for ti, got := range [2]*flashattn.Tensor{k, v} {
		bad := 0
		for bi := range c.SeqLens {
			for n := 0; n < c.Ncache; n++ {
				blk, row := bi, n
				if cache.BlockTable != nil {
					blk, row = cache.BlockTable[bi][n/c.BlockSize], n%c.BlockSize
				}
				for h := 0; h < c.Hkv; h++ {
					for x := 0; x < c.D; x++ {
						w, g := want[ti].At(bi, n, h, x), got.At(blk, row, h, x)
						if math.Abs(float64(g-w)) > u*math.Abs(float64(w))+floor {
							if bad++; bad <= 3 {
								t.Errorf("%s cache, batch %d entry %d head %d col %d: %v, want %v", [2]string{"k", "v"}[ti], bi, n, h, x, g, w)
							}
						}
					}
				}
			}
		}
	}
	d := res.Dims
	var seqs []*seqCheck
	for bi, n := range c.SeqLens {
		got := &flashattn.Result{Out: Rows(res.Out, bi, 0, c.Nq), LSE: res.LSE[d.LSEIndex(bi, 0, 0):][:c.Hq*c.Nq]}
		seqs = append(seqs, newSeqCheck(b.Precision, c.Case, bi, Rows(q, bi, 0, c.Nq), Rows(want[0], bi, 0, n+c.Append), Rows(want[1], bi, 0, n+c.Append), nil, got, nil))
	}
	checkSeqs(t, seqs)
}

// seqCheck is the check of one sequence (batch) of a call: its tensors, the
// backend's results and, for a sequence with queries and keys, its truth and
// baseline (nil otherwise).
type seqCheck struct {
	p           Precision
	c           Case
	s           int
	q, k        *flashattn.Tensor
	got         *flashattn.Result
	g           *flashattn.Grads
	truth, base *Ref
}

func newSeqCheck(p Precision, c Case, s int, q, k, v, dO *flashattn.Tensor, got *flashattn.Result, g *flashattn.Grads) *seqCheck {
	sc := &seqCheck{p: p, c: c, s: s, q: q, k: k, got: got, g: g}
	if q.Shape.N > 0 && k.Shape.N > 0 { // Rows gives dense tensors, whose shapes New accepted
		got.Dims, _ = flashattn.DimsOf(q, k, v)
		mods := ScoresOf(c.Options())
		sc.truth = ReferenceScores(q, k, v, dO, c.Causal, c.EffectiveScale(), mods)
		sc.base = BaselineScores(p, q, k, v, dO, c.Causal, c.EffectiveScale(), mods)
	}
	return sc
}

// checkSeqs checks the sequences of one call, each against its own truth,
// with the floors of the whole call: the largest |truth| of each quantity
// over every sequence (one packed tensor), not the sequence's own. A
// sequence whose gradients are 0 in exact arithmetic (Nk = 1: dS = P(dP -
// Di) with P = 1 and O = v) would otherwise get a floor of 0, and a backend
// that sums dP and Di apart (tensor cores, FA2's own Di kernel) lands a
// float32 rounding away from it, below any floor the tensor has.
// Sequences without queries or keys must give output 0 (and gradient 0)
// and LSE -Inf exactly.
func checkSeqs(t *testing.T, seqs []*seqCheck) {
	t.Helper()
	var outMax, lseMax float64
	var gradMax [3]float64
	for _, sc := range seqs {
		if r := sc.truth; r != nil {
			outMax, lseMax = math.Max(outMax, r.outMax), math.Max(lseMax, r.lseMax)
			for i := range gradMax {
				gradMax[i] = math.Max(gradMax[i], r.gradMax[i])
			}
		}
	}
	for _, sc := range seqs {
		s, q, k := sc.s, sc.q, sc.k
		if sc.truth == nil {
			for _, x := range sc.got.LSE {
				if !math.IsInf(float64(x), -1) {
					t.Errorf("sequence %d (Nq %d, Nk %d): LSE %v, want -Inf", s, q.Shape.N, k.Shape.N, x)
					break
				}
			}
			ts := []*flashattn.Tensor{sc.got.Out}
			if sc.g != nil {
				ts = append(ts, sc.g.DQ, sc.g.DK, sc.g.DV)
			}
		zero:
			for _, tt := range ts {
				for _, x := range tt.Data {
					if x != 0 {
						t.Errorf("sequence %d (Nq %d, Nk %d): output or gradient %v, want 0", s, q.Shape.N, k.Shape.N, x)
						break zero
					}
				}
			}
			continue
		}
		sc.truth.outMax, sc.truth.lseMax, sc.truth.gradMax = outMax, lseMax, gradMax
		if !CompareForward(sc.p, sc.truth, sc.base, sc.got).report(t) {
			t.Errorf("sequence %d (Nq %d, Nk %d) of %v: forward wrong", s, q.Shape.N, k.Shape.N, sc.c)
		}
		if sc.g != nil && !CompareBackward(sc.p, sc.truth, sc.base, sc.g).report(t) {
			t.Errorf("sequence %d (Nq %d, Nk %d) of %v: backward wrong", s, q.Shape.N, k.Shape.N, sc.c)
		}
	}
}
