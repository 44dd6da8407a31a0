// params.cuh: the two kernel arguments, shared with Go: FwdParams (every forward
// kernel) and BwdParams (the three backward kernels), internal/kernels.FwdParams
// and BwdParams. Layout is part of the launch contract: the Go struct is passed
// by value as raw bytes, so every offset below is asserted.
#pragma once
#include <cstddef>
#include <cstdint>

struct FwdParams {
  // Device pointers: q, k, v, o fp16 (BSHD, last dim contiguous); lse fp32 (B, Hq, Nq).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;

  // Element strides (int64 so B*N*H*D may exceed 2^31).
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;

  int32_t b, nq, nk, hq, hkv, d;
  float scale_log2;  // softmax scale * log2(e): scores go through exp2
  float scale;       // softmax scale, for the natural-log LSE

  // Read by the modified forward only (fa2_fwd_*_mod, mask.cuh's ScoreMods):
  // ALiBi slopes fp32 (Hq) or null, the window's reach (-1 unbounded; causal
  // is right 0) and the softcap (0: none).
  const float* alibi_slopes;
  int32_t window_left, window_right;
  float softcap;  // then 4 bytes of padding, as in the Go struct

  // Read by the varlen forward only (fa2_fwd_*_varlen, varlen.cuh): int32
  // (b + 1) cumulative lengths; sequence s owns rows [cu[s], cu[s+1]) of the
  // packed q, o (cu_seqlens_q) and k, v (cu_seqlens_k), and nq is the packed
  // total (the LSE's row stride).
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  // Read by the Hopper varlen forward only (fa2_fwd_sm90a_*_varlen): the
  // sequences and the longest one's rows, which size its tile order (0 for
  // every other call).
  int32_t seqs, max_nq;
};

static_assert(sizeof(void*) == 8, "64-bit device pointers");
// One assert per field; the message is the Go field name (internal/kernels checks them).
static_assert(offsetof(FwdParams, q) == 0, "Q");
static_assert(offsetof(FwdParams, k) == 8, "K");
static_assert(offsetof(FwdParams, v) == 16, "V");
static_assert(offsetof(FwdParams, o) == 24, "O");
static_assert(offsetof(FwdParams, lse) == 32, "LSE");
static_assert(offsetof(FwdParams, q_batch_stride) == 40, "QBatchStride");
static_assert(offsetof(FwdParams, q_row_stride) == 48, "QRowStride");
static_assert(offsetof(FwdParams, q_head_stride) == 56, "QHeadStride");
static_assert(offsetof(FwdParams, k_batch_stride) == 64, "KBatchStride");
static_assert(offsetof(FwdParams, k_row_stride) == 72, "KRowStride");
static_assert(offsetof(FwdParams, k_head_stride) == 80, "KHeadStride");
static_assert(offsetof(FwdParams, v_batch_stride) == 88, "VBatchStride");
static_assert(offsetof(FwdParams, v_row_stride) == 96, "VRowStride");
static_assert(offsetof(FwdParams, v_head_stride) == 104, "VHeadStride");
static_assert(offsetof(FwdParams, o_batch_stride) == 112, "OBatchStride");
static_assert(offsetof(FwdParams, o_row_stride) == 120, "ORowStride");
static_assert(offsetof(FwdParams, o_head_stride) == 128, "OHeadStride");
static_assert(offsetof(FwdParams, b) == 136, "B");
static_assert(offsetof(FwdParams, nq) == 140, "Nq");
static_assert(offsetof(FwdParams, nk) == 144, "Nk");
static_assert(offsetof(FwdParams, hq) == 148, "Hq");
static_assert(offsetof(FwdParams, hkv) == 152, "Hkv");
static_assert(offsetof(FwdParams, d) == 156, "D");
static_assert(offsetof(FwdParams, scale_log2) == 160, "ScaleLog2");
static_assert(offsetof(FwdParams, scale) == 164, "Scale");
static_assert(offsetof(FwdParams, alibi_slopes) == 168, "ALiBi");
static_assert(offsetof(FwdParams, window_left) == 176, "WindowLeft");
static_assert(offsetof(FwdParams, window_right) == 180, "WindowRight");
static_assert(offsetof(FwdParams, softcap) == 184, "Softcap");
static_assert(offsetof(FwdParams, cu_seqlens_q) == 192, "CuSeqlensQ");
static_assert(offsetof(FwdParams, cu_seqlens_k) == 200, "CuSeqlensK");
static_assert(offsetof(FwdParams, seqs) == 208, "Seqs");
static_assert(offsetof(FwdParams, max_nq) == 212, "MaxNq");
static_assert(sizeof(FwdParams) == 216, "FwdParams size (Go: unsafe.Sizeof(FwdParams{}))");

// BwdParams: the argument of every backward kernel (pre, dK/dV, dQ; the
// single pass's dK/dV/dQ and dQ convert kernels). Same conventions as FwdParams.
struct BwdParams {
  // Inputs: q, k, v, o (the forward output) and dout fp16 (BSHD); lse fp32
  // (B, Hq, Nq), natural log, -inf for rows that see no key.
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* dout;
  const float* lse;
  // Di = rowsum(dO * O), fp32 (B, Hq, Nq): written by the pre kernel, read by the others.
  float* di;
  // Outputs, fp16 (BSHD): dq (B, Nq, Hq, D), dk and dv (B, Nk, Hkv, D).
  void* dq;
  void* dk;
  void* dv;

  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int64_t do_batch_stride, do_row_stride, do_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;

  int32_t b, nq, nk, hq, hkv, d;
  float scale_log2;  // softmax scale * log2(e)
  float scale;
  // The single pass's dQ accumulator, fp32 (B, Hq, dq_accum_rows, D) dense:
  // zeroed by the pre kernel, summed into with atomics (bwd_kv.cuh; the
  // Hopper pass: bulk reduce-adds, and its scratch after it, Sm90BwdArgs),
  // scaled to dq by the convert kernel. Null on the three-kernel path.
  float* dq_accum;
  // Read by the varlen backward only (fa2_bwd_*_varlen, varlen.cuh), as in
  // FwdParams: int32 (b + 1) cumulative lengths of the packed q, o, dout, dq
  // (cu_seqlens_q) and k, v, dk, dv (cu_seqlens_k); nq is the packed total
  // (the row stride of the LSE and Di, (Hq, total)).
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  // Read by the modified backward only (fa2_bwd_{dkdv,dq}_*_mod, bwd.cuh's
  // kMod), as FwdParams' ALiBi slopes, window and softcap.
  const float* alibi_slopes;
  int32_t window_left, window_right;
  float softcap;
  // The single pass's accumulator rows per (b, h): Tr*Br of its tile (Nq
  // rounded up to the query block), which the pre kernel zeroes; 0 without
  // dq_accum.
  int32_t dq_accum_rows;
};

static_assert(offsetof(BwdParams, q) == 0, "Q");
static_assert(offsetof(BwdParams, k) == 8, "K");
static_assert(offsetof(BwdParams, v) == 16, "V");
static_assert(offsetof(BwdParams, o) == 24, "O");
static_assert(offsetof(BwdParams, dout) == 32, "DO");
static_assert(offsetof(BwdParams, lse) == 40, "LSE");
static_assert(offsetof(BwdParams, di) == 48, "Di");
static_assert(offsetof(BwdParams, dq) == 56, "DQ");
static_assert(offsetof(BwdParams, dk) == 64, "DK");
static_assert(offsetof(BwdParams, dv) == 72, "DV");
static_assert(offsetof(BwdParams, q_batch_stride) == 80, "QBatchStride");
static_assert(offsetof(BwdParams, q_row_stride) == 88, "QRowStride");
static_assert(offsetof(BwdParams, q_head_stride) == 96, "QHeadStride");
static_assert(offsetof(BwdParams, k_batch_stride) == 104, "KBatchStride");
static_assert(offsetof(BwdParams, k_row_stride) == 112, "KRowStride");
static_assert(offsetof(BwdParams, k_head_stride) == 120, "KHeadStride");
static_assert(offsetof(BwdParams, v_batch_stride) == 128, "VBatchStride");
static_assert(offsetof(BwdParams, v_row_stride) == 136, "VRowStride");
static_assert(offsetof(BwdParams, v_head_stride) == 144, "VHeadStride");
static_assert(offsetof(BwdParams, o_batch_stride) == 152, "OBatchStride");
static_assert(offsetof(BwdParams, o_row_stride) == 160, "ORowStride");
static_assert(offsetof(BwdParams, o_head_stride) == 168, "OHeadStride");
static_assert(offsetof(BwdParams, do_batch_stride) == 176, "DOBatchStride");
static_assert(offsetof(BwdParams, do_row_stride) == 184, "DORowStride");
static_assert(offsetof(BwdParams, do_head_stride) == 192, "DOHeadStride");
static_assert(offsetof(BwdParams, dq_batch_stride) == 200, "DQBatchStride");
static_assert(offsetof(BwdParams, dq_row_stride) == 208, "DQRowStride");
static_assert(offsetof(BwdParams, dq_head_stride) == 216, "DQHeadStride");
static_assert(offsetof(BwdParams, dk_batch_stride) == 224, "DKBatchStride");
static_assert(offsetof(BwdParams, dk_row_stride) == 232, "DKRowStride");
static_assert(offsetof(BwdParams, dk_head_stride) == 240, "DKHeadStride");
static_assert(offsetof(BwdParams, dv_batch_stride) == 248, "DVBatchStride");
static_assert(offsetof(BwdParams, dv_row_stride) == 256, "DVRowStride");
static_assert(offsetof(BwdParams, dv_head_stride) == 264, "DVHeadStride");
static_assert(offsetof(BwdParams, b) == 272, "B");
static_assert(offsetof(BwdParams, nq) == 276, "Nq");
static_assert(offsetof(BwdParams, nk) == 280, "Nk");
static_assert(offsetof(BwdParams, hq) == 284, "Hq");
static_assert(offsetof(BwdParams, hkv) == 288, "Hkv");
static_assert(offsetof(BwdParams, d) == 292, "D");
static_assert(offsetof(BwdParams, scale_log2) == 296, "ScaleLog2");
static_assert(offsetof(BwdParams, scale) == 300, "Scale");
static_assert(offsetof(BwdParams, dq_accum) == 304, "DQAccum");
static_assert(offsetof(BwdParams, cu_seqlens_q) == 312, "CuSeqlensQ");
static_assert(offsetof(BwdParams, cu_seqlens_k) == 320, "CuSeqlensK");
static_assert(offsetof(BwdParams, alibi_slopes) == 328, "ALiBi");
static_assert(offsetof(BwdParams, window_left) == 336, "WindowLeft");
static_assert(offsetof(BwdParams, window_right) == 340, "WindowRight");
static_assert(offsetof(BwdParams, softcap) == 344, "Softcap");
static_assert(offsetof(BwdParams, dq_accum_rows) == 348, "DQAccumRows");
static_assert(sizeof(BwdParams) == 352, "BwdParams size (Go: unsafe.Sizeof(BwdParams{}))");

// DecodeParams: the argument of the KV-cache decode kernel (decode.cuh). Same
// conventions as FwdParams.
struct DecodeParams {
  // q, o (B, Nq, Hq, D) and the caches, 16-bit; lse fp32 (B, Hq, Nq).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  // Split workspace (splits > 1): partial O (splits, B*Hq*Nq, D) and LSE (splits, B*Hq*Nq), fp32.
  float* o_part;
  float* lse_part;
  const int32_t* seqlens;      // (B): cache entries of each sequence
  const int32_t* block_table;  // (B, table_stride) block indices, or null: a contiguous cache

  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;  // batch stride: a block's when paged
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;

  int32_t table_stride, page_size;  // paged: block-table row length, entries per block
  int32_t b, nq, hq, hkv, d;
  int32_t splits;  // grid x of the decode kernel
  // The window's reach around each sequence's diagonal (-1 unbounded; causal
  // is right 0), bottom-right per sequence: run-time values, as are the
  // softcap and ALiBi below (decode reads bytes; a score's extra ops are free).
  int32_t window_left, window_right;
  float scale_log2;
  float scale;
  // Split merge (splits > 1): two counters per CTA group (B*Hkv, row tiles),
  // zero before the first call and again after each (decode.cuh).
  int32_t* split_count;
  const float* alibi_slopes;  // fp32 (Hq) or null
  float softcap;              // 0: none
  // Every sequence's length when all are equal (always so at B = 1), else -1:
  // the kernel then needs no load of seqlens before its first copies (the
  // H200 probe: 0.2-0.4 us of a call's prologue).
  int32_t uniform_len;
  // The CTAs of a group that share its split merge, the last to finish
  // (splits > 1; the host's decodeMergeCTAs).
  int32_t merge_ctas;
};

static_assert(offsetof(DecodeParams, q) == 0, "Q");
static_assert(offsetof(DecodeParams, k) == 8, "K");
static_assert(offsetof(DecodeParams, v) == 16, "V");
static_assert(offsetof(DecodeParams, o) == 24, "O");
static_assert(offsetof(DecodeParams, lse) == 32, "LSE");
static_assert(offsetof(DecodeParams, o_part) == 40, "OPart");
static_assert(offsetof(DecodeParams, lse_part) == 48, "LSEPart");
static_assert(offsetof(DecodeParams, seqlens) == 56, "SeqLens");
static_assert(offsetof(DecodeParams, block_table) == 64, "BlockTable");
static_assert(offsetof(DecodeParams, q_batch_stride) == 72, "QBatchStride");
static_assert(offsetof(DecodeParams, q_row_stride) == 80, "QRowStride");
static_assert(offsetof(DecodeParams, q_head_stride) == 88, "QHeadStride");
static_assert(offsetof(DecodeParams, k_batch_stride) == 96, "KBatchStride");
static_assert(offsetof(DecodeParams, k_row_stride) == 104, "KRowStride");
static_assert(offsetof(DecodeParams, k_head_stride) == 112, "KHeadStride");
static_assert(offsetof(DecodeParams, v_batch_stride) == 120, "VBatchStride");
static_assert(offsetof(DecodeParams, v_row_stride) == 128, "VRowStride");
static_assert(offsetof(DecodeParams, v_head_stride) == 136, "VHeadStride");
static_assert(offsetof(DecodeParams, o_batch_stride) == 144, "OBatchStride");
static_assert(offsetof(DecodeParams, o_row_stride) == 152, "ORowStride");
static_assert(offsetof(DecodeParams, o_head_stride) == 160, "OHeadStride");
static_assert(offsetof(DecodeParams, table_stride) == 168, "TableStride");
static_assert(offsetof(DecodeParams, page_size) == 172, "PageSize");
static_assert(offsetof(DecodeParams, b) == 176, "B");
static_assert(offsetof(DecodeParams, nq) == 180, "Nq");
static_assert(offsetof(DecodeParams, hq) == 184, "Hq");
static_assert(offsetof(DecodeParams, hkv) == 188, "Hkv");
static_assert(offsetof(DecodeParams, d) == 192, "D");
static_assert(offsetof(DecodeParams, splits) == 196, "Splits");
static_assert(offsetof(DecodeParams, window_left) == 200, "WindowLeft");
static_assert(offsetof(DecodeParams, window_right) == 204, "WindowRight");
static_assert(offsetof(DecodeParams, scale_log2) == 208, "ScaleLog2");
static_assert(offsetof(DecodeParams, scale) == 212, "Scale");
static_assert(offsetof(DecodeParams, split_count) == 216, "SplitCount");
static_assert(offsetof(DecodeParams, alibi_slopes) == 224, "ALiBi");
static_assert(offsetof(DecodeParams, softcap) == 232, "Softcap");
static_assert(offsetof(DecodeParams, uniform_len) == 236, "UniformLen");
static_assert(offsetof(DecodeParams, merge_ctas) == 240, "MergeCTAs");
static_assert(sizeof(DecodeParams) == 248, "DecodeParams size (Go: unsafe.Sizeof(DecodeParams{}))");

// Sm90FwdArgs: the argument of the sm_90a forward (fa2_fwd_sm90a_*,
// fwd_sm90.cuh), passed as a __grid_constant__ so that TMA reads the tensor
// maps in parameter space: q, k, v as CUtensorMaps (128 opaque bytes each,
// 64-byte aligned; made on the host by cuTensorMapEncodeTiled, which is
// CUDA 12 API, hence bytes here), then the FwdParams every forward takes.
struct alignas(64) Sm90FwdArgs {
  unsigned char q_map[128];
  unsigned char k_map[128];
  unsigned char v_map[128];
  FwdParams p;
};
static_assert(offsetof(Sm90FwdArgs, q_map) == 0, "QMap");
static_assert(offsetof(Sm90FwdArgs, k_map) == 128, "KMap");
static_assert(offsetof(Sm90FwdArgs, v_map) == 256, "VMap");
static_assert(offsetof(Sm90FwdArgs, p) == 384, "P");
static_assert(sizeof(Sm90FwdArgs) == 640, "Sm90FwdArgs size (Go: unsafe.Sizeof(Sm90FwdArgs{}))");

// Sm90BwdArgs: the argument of the sm_90a backward (fa2_bwd_sm90a_*,
// bwd_sm90.cuh), as Sm90FwdArgs: the tensor maps of q, k, v and dout, then
// the BwdParams every backward takes. Its dq_accum holds, one after the
// other (rows = dq_accum_rows): the fp32 dQ accumulator (B, Hq, rows, D) in the
// consumers' fragment order, LSE log2(e) (B, Hq, rows; +inf where P is 0:
// rows past Nq or seeing no key), Di (B, Hq, rows; 0 past Nq), then one
// int32 turn counter per query block (B, Hq, rows / Br), all written by the
// pre kernel. det_spread (the ordered non-causal pass): nonzero where the
// host lets key block nb start at query block nb Tr / Tc (bwd_sm90.cuh),
// which needs every CTA of a (batch, kv head) resident at once.
// causal_groups (the plain causal pass): the (batch, kv head) pairs come in
// that many groups, each group's key blocks heaviest first (BwdCausalOrder);
// 0: each pair's key blocks lightest first, one pair after the other.
struct alignas(64) Sm90BwdArgs {
  unsigned char q_map[128];
  unsigned char k_map[128];
  unsigned char v_map[128];
  unsigned char do_map[128];
  BwdParams p;
  int32_t det_spread;
  int32_t causal_groups;
};
static_assert(offsetof(Sm90BwdArgs, q_map) == 0, "QMap");
static_assert(offsetof(Sm90BwdArgs, k_map) == 128, "KMap");
static_assert(offsetof(Sm90BwdArgs, v_map) == 256, "VMap");
static_assert(offsetof(Sm90BwdArgs, do_map) == 384, "DOMap");
static_assert(offsetof(Sm90BwdArgs, p) == 512, "P");
static_assert(offsetof(Sm90BwdArgs, det_spread) == 864, "DetSpread");
static_assert(offsetof(Sm90BwdArgs, causal_groups) == 868, "CausalGroups");
static_assert(sizeof(Sm90BwdArgs) == 896, "Sm90BwdArgs size (Go: unsafe.Sizeof(Sm90BwdArgs{}))");
