// Package kernels holds the embedded CUDA images of GoFlash's FlashAttention-2
// kernels, one per kernel family (Image, ImageOf), and their table: one
// Variant per kernel, found by its Key (stage, score modifiers, packed,
// ordered, causal, dtype, path, head dim, size, rung). Which key a call needs
// is flashattn's plan. The CUDA sources live in kernels/ at the repository
// root; kernels/build.sh regenerates the images, resources.md and
// table_gen.go.
//
// Kernels are named below by Key.Pass (the KernelInfo.Pass users see):
// "fwd", "fwd_varlen" (Packed), "fwd_mod_cap" (Mods), "bwd_dkdvqdet"
// (Ordered) and so on.
//
// Launch contract of the forward kernels (fwd; shared with kernels/*.cuh,
// keep both in step):
//   - one kernel parameter: a FwdParams struct passed by value;
//   - grid (ceil(Nq/Br), B*Hq, 1), block (Warps*32, 1, 1); B*Hq is a grid y
//     dimension, so at most 65535;
//   - dynamic shared memory SmemBytes (raise the function's
//     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB);
//   - q, k, v, o are fp16 (bf16 for the BF16 variants) in BSHD layout with the element strides given; the
//     head dim is contiguous and D == Variant.HeadDim; pointers are 16-byte
//     aligned and every stride is a multiple of 8 elements (rows move in
//     16-byte vectors); Hq is a multiple of Hkv (GQA: kv head = h/(Hq/Hkv));
//   - lse is float32 (B, Hq, Nq), contiguous, natural log; rows that see no
//     key (causal with Nq > Nk) get O = 0 and LSE = -Inf;
//   - causal masking is aligned bottom-right: key j is visible to query row i
//     iff j <= i + Nk - Nq;
//   - ScaleLog2 = Scale * log2(e).
//
// fwd_varlen takes the forward contract for B sequences packed along N: q, o
// (1, total_q, Hq, D) and k, v (1, total_k, Hkv, D) (batch strides unused),
// CuSeqlensQ and CuSeqlensK int32 (B+1) device arrays, Nq = total_q (Nk
// unused); grid (ceil(max sequence Nq / Br), B*Hq). Sequence b is its own
// problem on rows [CuSeqlensQ[b], CuSeqlensQ[b+1]) and keys
// [CuSeqlensK[b], CuSeqlensK[b+1]) (causal bottom-right on its own lengths);
// lse is (Hq, total_q). The modified forwards (fwd_mod*: Mods set) take the
// same contract when CuSeqlensQ is not 0 (the window and ALiBi's distance
// then on each sequence's own lengths), and the dense one when it is 0.
//
// The Hopper forward (Arch 90 keys: fp16 and bf16, dense, plain or modified; SM90ACubin, a
// module of its own that loads on compute capability 9.0 alone) takes the
// forward contract with one Sm90FwdArgs argument instead of FwdParams: the
// FwdParams, and before them the TMA tensor maps of q, k and v that
// SM90AMaps describes (encoded by cuTensorMapEncodeTiled, CUDA 12+ drivers);
// block Warps*32 threads (a producer warpgroup and Br/64 consumer ones), and
// a persistent grid (Variant.Persistent): (min(ceil(Nq/Br)*B*Hq, SMs), 1, 1),
// one CTA per SM at most, any fewer also correct. The maps need every byte stride a non-zero multiple of 16 (a
// broadcast operand, stride 0, runs the sm_80 kernel instead).
//
// The kernel ladder of tutorial chapter 6 (Key.Rung 1-4, Arch 0,
// the same code on both paths) takes the forward contract, with SmemBytes 0
// (static shared memory only).
//
// The backward pass is three kernels of the same arch path and head dim,
// launched in this order on one stream, each with one BwdParams by value:
//   - bwd_pre: grid (ceil(Nq/Br), B*Hq), block Warps*32, no shared memory;
//     writes Di = rowsum(dO * O) (B, Hq, Nq) fp32;
//   - bwd_dkdv: grid (ceil(Nk/Bc), B*Hkv), block Warps*32, SmemBytes; writes dK
//     (scaled by Scale) and dV, fp16, every row < Nk;
//   - bwd_dq: grid (ceil(Nq/Br), B*Hq), block Warps*32, SmemBytes; writes dQ
//     (scaled), fp16, every row < Nq.
//
// No kernel of these three uses atomics: each output element is summed by
// one thread in a fixed order, so results are bit-reproducible. The single
// pass (FA2's default backward; sm_80 path, head dims with a bwd_dkdvq
// variant) replaces the last two:
//   - bwd_pre as above, and with DQAccum set (a float32 buffer of
//     DQAccumLen(v, ...) elements, 16-byte aligned) it zeroes the accumulator's
//     DQAccumRows(v, Nq) rows of D floats per (b, h);
//   - bwd_dkdvq: grid (ceil(Nk/Bc), B*Hkv), block Warps*32, SmemBytes; writes
//     dK and dV as bwd_dkdv and adds dQ with fp32 atomics to DQAccum;
//   - bwd_dqconv: pre's grid and block (ceil(Nq/Br), B*Hq); reads DQAccum and
//     writes dQ (scaled), fp16 (bf16 for the BF16 variants), every row < Nq.
//
// The atomic adds run in no fixed order: dQ may differ in its last bits from
// call to call (dK and dV do not). bwd_dkdvqdet (Ordered; Large rows only: the same
// tile, symbols fa2_bwd_dkdvqdet_*) fixes the order, so the single pass is
// bit-reproducible: grid (B*Hkv, ceil(Nk/Bc)), heads fastest (HeadsFastest;
// D64's row has the causal twin alone), and DQAccum
// holds DQAccumLen(v, ...) elements, the accumulator followed by one int32
// counter per (b, h, query block), zero before the first call (bwd_pre zeroes
// the accumulator, bwd_dkdvqdet leaves the counters zero). Its CTAs
// wait for those earlier in the grid's linear order, so they rely on CTAs
// being dispatched in that order. A head dim may have two single-pass rows:
// a Large one (symbols ..._large, more than 99 KiB of shared memory) for
// devices whose opt-in limit fits it (LargeFits), and a <= 99 KiB one; the
// bwd_dqconv kernel of the row that runs must be the one launched (the
// accumulator's layout is its tile's).
//
// The Hopper backward (Arch 90 keys: fp16 and bf16, dense, unmodified;
// SM90ACubin) is the single pass's three kernels with one Sm90BwdArgs
// argument instead of BwdParams: the BwdParams, and before them the TMA
// tensor maps of q, k, v and dout that SM90ABwdMaps describes. DQAccum holds
// DQAccumLen(v, ...) elements (its layout: kernels/params.cuh's Sm90BwdArgs),
// all written by bwd_pre on every call, so no zeroing between calls; Di is
// not used. Grids: bwd_pre and bwd_dqconv (ceil(Nq/Br), B*Hq), bwd_dkdvq
// and its ordered twin (ceil(Nk/Bc), B*Hkv), blocks Warps*32. The ordered
// twin's CTAs wait for those dispatched before them, as bwd_dkdvqdet's.
//
// q, k, v, o (the forward output), dout, dq, dk, dv are fp16 with the same
// layout rules as the forward; lse is the forward's (-Inf rows give dQ = 0).
//
// bwd_dkdv_mod and bwd_dq_mod are bwd_dkdv and bwd_dq (after the plain bwd_pre)
// with the sliding window, softcap and ALiBi of the modified forward, read
// from BwdParams' fields as FwdParams' (causal is WindowRight 0; no causal
// variant); lse must be the modified forward's. On packed sequences
// (CuSeqlensQ not 0: the varlen contract below) they run after bwd_pre_varlen.
// A head dim whose only backward is the single pass (D 256) has
// bwd_dkdvq_mod and bwd_dkdvqdet_mod instead: bwd_dkdvq and bwd_dkdvqdet with the
// same modifiers (the single-pass contract above: bwd_pre zeroes DQAccum,
// bwd_dqconv converts it; no causal variant). bwd_dkdvq_mod also takes packed
// sequences (CuSeqlensQ set, modifiers or not: their backward at those head
// dims), after bwd_pre_varlen (which then zeroes DQAccum) and before bwd_dqconv
// (which reads CuSeqlensQ too): grids as the varlen three's, DQAccum
// DQAccumLenPacked(v, ...) elements, DQAccumRows DQAccumRowsPacked(...).
// So does bwd_dkdvqdet_mod (its grid heads fastest, (B*Hkv, ceil(max sequence
// Nk / Bc)), its counters after the floats, zero before the call as for
// dense calls).
//
// bwd_pre_varlen, bwd_dkdv_varlen and bwd_dq_varlen are the three-kernel backward
// on B sequences packed as fwd_varlen's (the same tiles): q, o, dout, dq
// (1, total_q, Hq, D), k, v, dk, dv (1, total_k, Hkv, D), CuSeqlensQ and
// CuSeqlensK as fwd_varlen's, Nq = total_q (lse and Di are (Hq, total_q));
// grids (ceil(max sequence Nq / Br), B*Hq) for pre and dQ and
// (ceil(max sequence Nk / Bc), B*Hkv) for dK/dV. Sequence b is its own
// problem (causal bottom-right on its own lengths); a sequence without
// queries gets dK = dV = 0, one without keys dQ = 0.
// KV-cache decode is one kernel (decode) with one DecodeParams by value
// (causal, the window, softcap and ALiBi are its fields): grid (Splits, B*Hkv, ceil(Nq*Hq/Hkv / Br)),
// block Warps*32, SmemBytes; q, o (B, Nq, Hq, D) with the forward's layout
// rules; the cache k, v (B, Ncache, Hkv, D), or paged (blocks, PageSize, Hkv,
// D) with BlockTable (B, TableStride) int32, PageSize a multiple of 16;
// SeqLens (B) int32. It writes O and the LSE of every row. With Splits > 1
// each CTA also writes OPart (Splits, B*Hq*Nq, D) and LSEPart (Splits,
// B*Hq*Nq) fp32, rows in the LSE's order, and the last MergeCTAs CTAs of
// each (B*Hkv, row tile) group to finish merge them, each a share of the
// group's rows and columns, counting in SplitCount: two int32 per group (zero
// before the call, zero again after it).
//
// Masks are bottom-right per sequence (off = SeqLens[b] - Nq): query row i of
// batch b sees cache entry j iff i+off-WindowLeft <= j <= i+off+WindowRight
// (-1: that side open; causal is WindowRight 0), and a CTA reads only the
// entries its rows see; a row that sees no entry gets O = 0, LSE -Inf.
// Softcap and ALiBi act as in the modified forward (the bias
// -slope_h*|i+off-j|).
package kernels

// FwdParams mirrors `struct FwdParams` in kernels/params.cuh, field for field
// (the CUDA side static_asserts its size and offsets).
type FwdParams struct {
	Q, K, V, O, LSE uint64 // device pointers

	QBatchStride, QRowStride, QHeadStride int64 // elements
	KBatchStride, KRowStride, KHeadStride int64
	VBatchStride, VRowStride, VHeadStride int64
	OBatchStride, ORowStride, OHeadStride int64

	B, Nq, Nk, Hq, Hkv, D int32
	ScaleLog2             float32 // softmax scale * log2(e): the kernels use exp2
	Scale                 float32

	// Read by the modified forward kernels only (Mods set): ALiBi slopes (float32, Hq) or 0, the
	// sliding window's reach (-1 unbounded; causal is WindowRight 0) and the
	// softcap (0: none).
	ALiBi                   uint64
	WindowLeft, WindowRight int32
	Softcap                 float32

	// Read by the fwd_varlen kernels, and by the modified forwards where not 0:
	// int32 (B+1) cumulative sequence lengths of the packed q (and O) and k
	// (and v); Nq is the packed total.
	CuSeqlensQ, CuSeqlensK uint64

	// Read by the Hopper varlen forward only: the sequences and the longest
	// one's rows, which size its tile order; 0 for every other call.
	Seqs, MaxNq int32
}

// Sm90FwdArgs mirrors `struct Sm90FwdArgs` in kernels/params.cuh, the one
// argument of the Hopper forward (Arch 90 keys): the TMA tensor maps of q, k
// and v (cuTensorMapEncodeTiled's CUtensorMap, see SM90AMaps), then the
// FwdParams every forward takes. The C struct is 64-byte aligned, so its
// size is rounded up to 640: the padding makes the Go value as long.
type Sm90FwdArgs struct {
	QMap, KMap, VMap [128]byte
	P                FwdParams
	_                [640 - 384 - 216]byte
}

// Sm90BwdArgs mirrors `struct Sm90BwdArgs` in kernels/params.cuh, the one
// argument of the Hopper backward (Arch 90 keys of the backward stages): the
// TMA tensor maps of q, k, v and dout (SM90ABwdMaps), then the BwdParams;
// padded to the C struct's 64-byte multiple, 896.
type Sm90BwdArgs struct {
	QMap, KMap, VMap, DOMap [128]byte
	P                       BwdParams
	// DetSpread (the ordered non-causal pass): nonzero where every CTA of a
	// (batch, kv head) can be resident at once (kernels/bwd_sm90.cuh).
	DetSpread int32
	// CausalGroups (the plain causal pass): the (batch, kv head) pairs come
	// in that many groups, each group's key blocks heaviest first; 0: each
	// pair's key blocks lightest first, one pair after the other.
	CausalGroups int32
	_            [896 - 512 - 352 - 8]byte
}

// BwdParams mirrors `struct BwdParams` in kernels/params.cuh, the argument of
// the three backward kernels.
type BwdParams struct {
	Q, K, V, O, DO, LSE, Di, DQ, DK, DV uint64 // device pointers

	QBatchStride, QRowStride, QHeadStride    int64 // elements
	KBatchStride, KRowStride, KHeadStride    int64
	VBatchStride, VRowStride, VHeadStride    int64
	OBatchStride, ORowStride, OHeadStride    int64
	DOBatchStride, DORowStride, DOHeadStride int64
	DQBatchStride, DQRowStride, DQHeadStride int64
	DKBatchStride, DKRowStride, DKHeadStride int64
	DVBatchStride, DVRowStride, DVHeadStride int64

	B, Nq, Nk, Hq, Hkv, D int32
	ScaleLog2             float32
	Scale                 float32
	DQAccum               uint64 // the single pass's fp32 dQ accumulator (bwd_dkdvq[det], bwd_dqconv); 0 otherwise

	// Read by the varlen backward (bwd_pre_varlen, bwd_dkdv_varlen,
	// bwd_dq_varlen), and by bwd_dkdv_mod, bwd_dq_mod where not 0: as FwdParams'
	// CuSeqlensQ, CuSeqlensK.
	CuSeqlensQ, CuSeqlensK uint64

	// Read by the modified backward only (bwd_dkdv_mod, bwd_dq_mod): as
	// FwdParams' ALiBi, WindowLeft, WindowRight and Softcap.
	ALiBi                   uint64
	WindowLeft, WindowRight int32
	Softcap                 float32

	// The single pass's accumulator rows per (b, h), DQAccumRows(v, Nq),
	// which bwd_pre zeroes; 0 without DQAccum.
	DQAccumRows int32
}

// HeadsFastest says whether variant v's grid is (B*Hkv, ceil(Nk/Bc)): the
// sm_80 path's ordered single pass (kDet in kernels/bwd_kv.cuh: key block n
// of a head starts about a wave after n-1, so it seldom waits for n-1's
// adds); the Hopper one's grid is (ceil(Nk/Bc), B*Hkv).
func HeadsFastest(v Variant) bool { return v.Stage == BwdDKDVQ && v.Ordered && v.Arch != SM90A }

// DQAccumLen is the 4-byte length of the dQ accumulator of single-pass
// variant v (Stage BwdDKDVQ): (B, Hq, ceil(Nq/Br)*Br, D) float32, each Br-row
// query block stored whole; for the ordered one followed by its (B, Hq,
// ceil(Nq/Br)) int32 counters.
//
// The Hopper single pass's (Arch 90) is, one after the other, the
// accumulator (B, Hq, rows, D), LSE log2(e) and Di (B, Hq, rows each)
// float32, and one int32 turn per query block (kernels/params.cuh's
// Sm90BwdArgs), whether ordered or not.
func DQAccumLen(v Variant, b, nq, hq int) int {
	blocks := b * hq * ((nq + v.Br - 1) / v.Br)
	if v.Arch == SM90A {
		return b*hq*DQAccumRows(v, nq)*(v.HeadDim+2) + blocks
	}
	n := b * hq * DQAccumRows(v, nq) * v.HeadDim
	if HeadsFastest(v) { // the ordered twins
		n += blocks
	}
	return n
}

// DQAccumRows is the dQ accumulator's rows per (b, h) for single-pass variant v:
// Nq rounded up to v's query block (BwdParams.DQAccumRows).
func DQAccumRows(v Variant, nq int) int { return (nq + v.Br - 1) / v.Br * v.Br }

// DQAccumRowsPacked is the accumulator's rows per head for bwd_dkdvq_mod on
// seqs packed sequences of totalQ query rows in all (BwdParams.DQAccumRows):
// each sequence's rows rounded up to AccumPad (kernels/bwd_kv.cuh's
// dq_accum_row), bounded by totalQ + seqs*AccumPad.
func DQAccumRowsPacked(seqs, totalQ int) int { return totalQ + seqs*AccumPad }

// DQAccumLenPacked is DQAccumLen on packed sequences: (Hq, DQAccumRowsPacked,
// D) float32; for bwd_dkdvqdet_mod then one int32 counter per Br rows of that
// (a query block's at its first row / Br: blocks start at least Br rows apart).
func DQAccumLenPacked(v Variant, seqs, totalQ, hq int) int {
	rows := hq * DQAccumRowsPacked(seqs, totalQ)
	n := rows * v.HeadDim
	if HeadsFastest(v) {
		n += (rows + v.Br - 1) / v.Br
	}
	return n
}

// DecodeParams mirrors `struct DecodeParams` in kernels/params.cuh, the
// argument of the decode kernel.
type DecodeParams struct {
	Q, K, V, O, LSE     uint64 // device pointers
	OPart, LSEPart      uint64 // split workspace (fp32), used when Splits > 1
	SeqLens, BlockTable uint64 // int32 (B) and (B, TableStride); BlockTable 0: contiguous cache

	QBatchStride, QRowStride, QHeadStride int64 // elements
	KBatchStride, KRowStride, KHeadStride int64 // KBatchStride: a block's when paged
	VBatchStride, VRowStride, VHeadStride int64
	OBatchStride, ORowStride, OHeadStride int64

	TableStride, PageSize int32
	B, Nq, Hq, Hkv, D     int32
	Splits                int32
	// The sliding window's reach (-1 unbounded; causal is WindowRight 0),
	// bottom-right per sequence, as FwdParams' but read by every decode kernel.
	WindowLeft, WindowRight int32
	ScaleLog2               float32
	Scale                   float32
	SplitCount              uint64 // int32 (B*Hkv*row tiles, 2), zero before the first call; used when Splits > 1
	ALiBi                   uint64 // float32 (Hq) slopes or 0
	Softcap                 float32
	UniformLen              int32 // every SeqLens entry when they are all equal, else -1
	MergeCTAs               int32 // the CTAs of a group that share its split merge (Splits > 1)
}

// Stage says which step of attention a kernel computes.
type Stage uint8

const (
	Fwd       Stage = iota // O and the LSE
	BwdPre                 // Di = rowsum(dO * O)
	BwdDKDV                // dK and dV
	BwdDQ                  // dQ
	BwdDKDVQ               // the single pass: dK, dV, and dQ added to an fp32 accumulator
	BwdDQConv              // the single pass's dQ from its accumulator
	Decode                 // KV-cache decode: O and LSE, or each split's partial ones
)

var stageNames = [...]string{"fwd", "bwd_pre", "bwd_dkdv", "bwd_dq", "bwd_dkdvq", "bwd_dqconv", "decode"}

func (s Stage) String() string {
	if int(s) < len(stageNames) {
		return stageNames[s]
	}
	return "stage?"
}

// Mods are the score modifiers a kernel takes, kernels/fwd.cuh's kMod bits.
type Mods uint8

const (
	// ModOn: the modified kernel, which takes the sliding window
	// (FwdParams' window fields; causal is its right edge 0, so there is no
	// causal twin) and packed sequences where CuSeqlensQ is set; the
	// backward's also take the softcap and ALiBi, as run-time flags.
	ModOn    Mods = 1 << iota
	ModCap        // the modified forward with the softcap compiled in
	ModALiBi      // the modified forward with ALiBi compiled in
)

// FwdMods are the Mods of the modified forward for a problem with a window
// (or causal), softcap and ALiBi as given: the window is a parameter of
// every one; the softcap and ALiBi are compiled in (kernels/fwd.cuh's kMod),
// so a score pays only for the modifiers it has.
func FwdMods(softcap, alibi bool) Mods {
	m := ModOn
	if softcap {
		m |= ModCap
	}
	if alibi {
		m |= ModALiBi
	}
	return m
}

// Key names one compiled kernel: at most one Variant has a given Key.
type Key struct {
	Stage   Stage
	Mods    Mods // 0: the plain kernel
	Packed  bool // the varlen kernel: B sequences packed along N (FwdParams.CuSeqlensQ, CuSeqlensK)
	Ordered bool // the single pass with its dQ additions in a fixed order (bit-reproducible)
	Arch    int  // the path: 75 (Turing: m16n8k8, no cp.async, <= 64 KiB smem), 80 (sm_80+), 90 (the Hopper forward), 0 (a ladder rung)
	HeadDim int
	Causal  bool // bwd_pre and bwd_dqconv, which do not depend on the mask, have the non-causal key alone
	// BF16: q, k, v, o (and dO and the gradients) are bfloat16 (the sm_80
	// path only: fa2_{fwd,bwd_pre,bwd_dkdv,bwd_dq,bwd_dkdvq,bwd_dqconv}_sm80_d{D}_bf16[_causal],
	// the fp16 tile on bf16 mma); else fp16.
	BF16 bool
	// Large marks a kernel of a large row (traits.cuh: more than 99 KiB of
	// shared memory for its set, symbols ending in _large, listed before the
	// <= 99 KiB row of the same key): it runs only on devices whose opt-in
	// limit fits the set (LargeFits), e.g. A100 and H100/H200, not sm_86/89
	// (which run the base row: D 128 and D 256 have one).
	Large bool
	// Short marks the Hopper forward's short-call kernel (traits.cuh's
	// FA2_SM90A_SHORT_TILES, symbols ending in _short): dense plain calls of at
	// most Variant.MaxNq query rows run it instead of the kernel without it.
	Short bool
	// Rung is 0 for the shipped kernels and 1-4 for the kernel ladder of
	// tutorial chapter 6 (kernels/ladder/: fwd only, the same code on both
	// paths, so Arch 0; rung 5 is the shipped forward kernel).
	Rung int
}

// Pass is the kernel's name as KernelInfo.Pass reports it: the stage, "det"
// for the ordered single pass, "_mod" ("_cap", "_alibi") for the modifiers,
// "_varlen" for packed sequences, "_short" for a short-call kernel, e.g.
// "fwd_mod_cap", "bwd_dkdvqdet_mod", "bwd_dq_varlen", "fwd_short".
func (k Key) Pass() string {
	s := k.Stage.String()
	if k.Ordered {
		s += "det"
	}
	if k.Mods&ModOn != 0 {
		s += "_mod"
	}
	if k.Mods&ModCap != 0 {
		s += "_cap"
	}
	if k.Mods&ModALiBi != 0 {
		s += "_alibi"
	}
	if k.Packed {
		s += "_varlen"
	}
	if k.Short {
		s += "_short"
	}
	return s
}

// Variant is one compiled kernel: its Key and how to launch it.
type Variant struct {
	Key
	Symbol string
	// Br, Bc: query rows per CTA and key rows per step (fwd, bwd_dq;
	// bwd_pre, bwd_dqconv: rows per CTA, Bc 0); for bwd_dkdv and the single
	// pass key rows per CTA (Bc) and query rows per step (Br).
	Br, Bc int
	Warps  int
	// ColGroups (bwd_dkdv, bwd_dq and their varlen and modified twins): warps
	// sharing each 16 owned rows, each accumulating its share of the head
	// dim's columns (traits.cuh's BwdTile; Turing's D 256); 0 means 1.
	ColGroups int
	SmemBytes int // dynamic shared memory per CTA
	// SM80CausalMaxNk (a causal Hopper forward, Arch 90): calls of at most
	// this many keys run the sm_80 kernel instead, faster there (traits.cuh's
	// FA2_SM90A_TILES); 0: none.
	SM80CausalMaxNk int
	// Persistent (the Hopper forward, traits.cuh's kPersistent; not its backward): the grid is
	// (min(ceil(Nq/Br)*B*Hq, SMs), 1, 1), each CTA walking its share of the
	// (query block, batch, head) tiles, instead of one CTA per tile.
	Persistent bool
	// MaxNq (a Short kernel): the most query rows of a call it runs.
	MaxNq int
}

// LadderRungs is the number of ladder rungs with kernels of their own (1-4);
// rung LadderRungs+1 is the shipped forward kernel.
const LadderRungs = 4

// SM90A is the compute capability (as major*10 + minor) whose devices run
// the Hopper kernels: sm_90a SASS runs on 9.0 alone. It is also the Arch of
// their keys (fa2_sm90a.cubin, SM90ACubin): the forward (fwd, plain or
// modified, fp16 and bf16, dense; the forward's contract with an
// Sm90FwdArgs argument, SM90AMaps, block Warps*32 threads, the persistent
// grid, SmemBytes of dynamic shared memory above 48 KiB: opt in) and the
// backward's single pass (bwd_pre, bwd_dkdvq[det], bwd_dqconv, fp16 and
// bf16, dense, unmodified; the contract above the backward's list).
const SM90A = 90

// SM90AVariants returns a copy of the Hopper kernels (forward and backward).
func SM90AVariants() []Variant { return append([]Variant(nil), sm90aVariants...) }

// SM90ABox is the TMA box of one Hopper copy: 64 columns (a 128-byte
// swizzle row of fp16) by 64 rows of Q (one consumer warpgroup's) or Bc
// rows of K and V. SM90AMaps builds the three maps of a call from it.
const SM90ABox = 64

// TensorMapView is one operand as the Hopper kernels' tensor maps see it:
// dims (d, rows, heads, batch) innermost first, byte strides of rows, heads
// and batches, and the rows one box copies.
type TensorMapView struct {
	Dims    [4]uint64
	Strides [3]uint64 // bytes
	BoxRows uint32
}

// SM90ABwdMaps gives the four views (q, k, v, dout) of a dense backward
// with the element strides of BwdParams p for the Hopper single pass v: as
// SM90AMaps, Q and dO in boxes of Br rows, K and V of Bc.
func SM90ABwdMaps(v Variant, p *BwdParams) (views [4]TensorMapView, ok bool) {
	ops := [4]mapOperand{
		{p.Nq, p.Hq, p.QRowStride, p.QHeadStride, p.QBatchStride, v.Br},
		{p.Nk, p.Hkv, p.KRowStride, p.KHeadStride, p.KBatchStride, v.Bc},
		{p.Nk, p.Hkv, p.VRowStride, p.VHeadStride, p.VBatchStride, v.Bc},
		{p.Nq, p.Hq, p.DORowStride, p.DOHeadStride, p.DOBatchStride, v.Br},
	}
	return views, viewsOf(views[:], ops[:], p.D, p.B)
}

// mapOperand is one operand of a Hopper call: its rows and heads, element
// strides of rows, heads and batches, and the rows of one box.
type mapOperand struct {
	rows, heads int32
	rs, hs, bs  int64
	box         int
}

// viewsOf writes into views the view of each of ops for head dim d and b
// batches; false where TMA cannot express one.
func viewsOf(views []TensorMapView, ops []mapOperand, d, b int32) bool {
	for i, o := range ops {
		var ok bool
		if views[i], ok = o.view(d, b); !ok {
			return false
		}
	}
	return true
}

// view is o's TensorMapView for head dim d and b batches; ok is false where
// TMA cannot express it (a stride not a multiple of 16 bytes, or 2^40 bytes
// and more).
func (o mapOperand) view(d, b int32) (TensorMapView, bool) {
	vw := TensorMapView{Dims: [4]uint64{uint64(d), uint64(o.rows), uint64(o.heads), uint64(b)}, BoxRows: uint32(o.box)}
	for j, s := range []int64{o.rs, o.hs, o.bs} {
		n := 2 * s
		if n <= 0 || n%16 != 0 || n >= 1<<40 {
			if j == 2 && b == 1 && n == 0 { // one batch: its stride is never used
				n = 16
			} else {
				return vw, false
			}
		}
		vw.Strides[j] = uint64(n)
	}
	return vw, true
}

// SM90AMaps gives the three views (q, k, v) of a dense forward with
// the element strides of FwdParams p for Hopper kernel v: (d, row, head,
// batch) with p's strides, so BSHD and BHSD alike; Q in boxes of 64 rows, K
// and V of Bc. ok is false where TMA cannot express them (a stride not a
// multiple of 16 bytes, or 2^40 bytes and more): then the sm_80 kernel runs.
func SM90AMaps(v Variant, p *FwdParams) (views [3]TensorMapView, ok bool) {
	ops := [3]mapOperand{
		{p.Nq, p.Hq, p.QRowStride, p.QHeadStride, p.QBatchStride, 64},
		{p.Nk, p.Hkv, p.KRowStride, p.KHeadStride, p.KBatchStride, v.Bc},
		{p.Nk, p.Hkv, p.VRowStride, p.VHeadStride, p.VBatchStride, v.Bc},
	}
	return views, viewsOf(views[:], ops[:], p.D, p.B)
}
