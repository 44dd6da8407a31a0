// bwd.cu: the backward family, built into fa2_bwd.fatbin (and its Turing PTX,
// fa2_bwd_ptx75.fatbin): one extern "C" symbol per (pass, arch path, head dim,
// causal, dtype, variant): the three kernels fa2_bwd_pre_sm{75,80}_d{D},
// fa2_bwd_dkdv_sm{75,80}_d{D}[_causal], fa2_bwd_dq_sm{75,80}_d{D}[_causal]
// (plus the sm80 ones with _bf16 after d{D}), the same three plus _varlen and
// dK/dV and dQ plus _mod; the single pass
// fa2_bwd_dkdvq[det]_sm80_d{D}[_large][_bf16][_causal] and
// fa2_bwd_dqconv_sm80_d{D}[_large][_bf16] (where it is the only backward also
// fa2_bwd_dkdvq[det]_sm80_d{D}_large[_bf16]_mod), for exactly the (arch, D)
// rows of traits.cuh's FA2_BWD_TILES and FA2_BWD_KVQ_TILES (with
// FA2_BWD_KVQ_ALONE); the Go table (internal/kernels/table_gen.go, generated
// by tiles.cu) lists the same symbols.
#include "bwd.cuh"
#include "bwd_kv.cuh"

// Backward: pre (Di, no tensor cores: the same code under both path names, so
// each path's module is complete), dK/dV and dQ.
#define FA2_BWD(ARCH, D)                                                                          \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads) fa2_bwd_pre_sm##ARCH##_d##D(const BwdParams p) { \
    fa2::bwd_pre_kernel<D>(p);                                                                    \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(BwdKVTraits<ARCH, D>::type::kThreads,             \
                                               BwdKVTraits<ARCH, D>::type::kMinBlocks)           \
      fa2_bwd_dkdv_sm##ARCH##_d##D(const BwdParams p) {                                           \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dkdv_kernel<BwdKVTraits<ARCH, D>::type, false>>(p);                                    \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(BwdKVTraits<ARCH, D>::type::kThreads,             \
                                               BwdKVTraits<ARCH, D>::type::kMinBlocks)           \
      fa2_bwd_dkdv_sm##ARCH##_d##D##_causal(const BwdParams p) {                                  \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dkdv_kernel<BwdKVTraits<ARCH, D>::type, true>>(p);                                     \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(BwdQTraits<ARCH, D>::type::kThreads,              \
                                               BwdQTraits<ARCH, D>::type::kMinBlocks)            \
      fa2_bwd_dq_sm##ARCH##_d##D(const BwdParams p) {                                             \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dq_kernel<BwdQTraits<ARCH, D>::type, false>>(p);                                       \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(BwdQTraits<ARCH, D>::type::kThreads,              \
                                               BwdQTraits<ARCH, D>::type::kMinBlocks)            \
      fa2_bwd_dq_sm##ARCH##_d##D##_causal(const BwdParams p) {                                    \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dq_kernel<BwdQTraits<ARCH, D>::type, true>>(p);                                        \
  }

// bf16 backward: every sm_80 row of FA2_BWD_TILES also ships
// fa2_bwd_{pre,dkdv,dq}_sm80_d{D}_bf16[_causal], the same tiles on __nv_bfloat16.
#define FA2_BWD_BF16(ARCH, D)                                                                                   \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads) fa2_bwd_pre_sm##ARCH##_d##D##_bf16(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_pre_kernel<D, __nv_bfloat16>>(p);                                 \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(BwdKVTraits<ARCH, D>::type::kThreads,                           \
                                               BwdKVTraits<ARCH, D>::type::kMinBlocks)                         \
      fa2_bwd_dkdv_sm##ARCH##_d##D##_bf16(const BwdParams p) {                                                  \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dkdv_kernel<BwdKVTraits<ARCH, D>::type, false, __nv_bfloat16>>(p); \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(BwdKVTraits<ARCH, D>::type::kThreads,                           \
                                               BwdKVTraits<ARCH, D>::type::kMinBlocks)                         \
      fa2_bwd_dkdv_sm##ARCH##_d##D##_bf16_causal(const BwdParams p) {                                           \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dkdv_kernel<BwdKVTraits<ARCH, D>::type, true, __nv_bfloat16>>(p);  \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(BwdQTraits<ARCH, D>::type::kThreads,                            \
                                               BwdQTraits<ARCH, D>::type::kMinBlocks)                          \
      fa2_bwd_dq_sm##ARCH##_d##D##_bf16(const BwdParams p) {                                                    \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dq_kernel<BwdQTraits<ARCH, D>::type, false, __nv_bfloat16>>(p);   \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(BwdQTraits<ARCH, D>::type::kThreads,                            \
                                               BwdQTraits<ARCH, D>::type::kMinBlocks)                          \
      fa2_bwd_dq_sm##ARCH##_d##D##_bf16_causal(const BwdParams p) {                                             \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_dq_kernel<BwdQTraits<ARCH, D>::type, true, __nv_bfloat16>>(p);    \
  }
// The varlen backward (packed sequences, cu_seqlens in BwdParams; bwd.cuh's
// kVarlen): the three kernels of every row and dtype plus _varlen, the same
// tiles. The three-kernel path, not the single pass: it runs on both paths
// and every head dim with a row, needs no fp32 dQ accumulator (whose padded
// per-(b, h) query blocks a packed batch would have to lay out per sequence)
// and is deterministic.
#define FA2_BWD_VARLEN(ARCH, D, SFX, E)                                                                               \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads) fa2_bwd_pre_sm##ARCH##_d##D##SFX##_varlen(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_pre_kernel<D, E, true>>(p);                                               \
  }                                                                                                                     \
  FA2_BWD_VARLEN1(ARCH, D, BwdKVTraits, bwd_dkdv_kernel, fa2_bwd_dkdv_sm##ARCH##_d##D##SFX##_varlen, false, E)          \
  FA2_BWD_VARLEN1(ARCH, D, BwdKVTraits, bwd_dkdv_kernel, fa2_bwd_dkdv_sm##ARCH##_d##D##SFX##_causal_varlen, true, E)    \
  FA2_BWD_VARLEN1(ARCH, D, BwdQTraits, bwd_dq_kernel, fa2_bwd_dq_sm##ARCH##_d##D##SFX##_varlen, false, E)               \
  FA2_BWD_VARLEN1(ARCH, D, BwdQTraits, bwd_dq_kernel, fa2_bwd_dq_sm##ARCH##_d##D##SFX##_causal_varlen, true, E)
#define FA2_BWD_VARLEN1(ARCH, D, TRAITS, KERNEL, NAME, CAUSAL, E)                                              \
  extern "C" __global__ void __launch_bounds__(TRAITS<ARCH, D>::type::kThreads, TRAITS<ARCH, D>::type::kMinBlocks) \
      NAME(const BwdParams p) {                                                                                   \
    fa2::arch_entry<ARCH, BwdParams, fa2::KERNEL<TRAITS<ARCH, D>::type, CAUSAL, E, true>>(p);                     \
  }
// The modified backward (window, softcap, ALiBi; bwd.cuh's kMod): dK/dV and dQ
// of every row and dtype plus _mod, run-time flags (FA2_BWD_TILES says why);
// pre is the plain one.
#define FA2_BWD_MOD(ARCH, D, SFX, E)                                                                    \
  FA2_BWD_MOD1(ARCH, D, BwdKVTraits, bwd_dkdv_kernel, fa2_bwd_dkdv_sm##ARCH##_d##D##SFX##_mod, E)      \
  FA2_BWD_MOD1(ARCH, D, BwdQTraits, bwd_dq_kernel, fa2_bwd_dq_sm##ARCH##_d##D##SFX##_mod, E)
#define FA2_BWD_MOD1(ARCH, D, TRAITS, KERNEL, NAME, E)                                                             \
  extern "C" __global__ void __launch_bounds__(TRAITS<ARCH, D>::type::kThreads, TRAITS<ARCH, D>::type::kMinBlocks) \
      NAME(const BwdParams p) {                                                                                   \
    fa2::arch_entry<ARCH, BwdParams, fa2::KERNEL<TRAITS<ARCH, D>::type, false, E, false, true>>(p);               \
  }
#define FA2_BWD_SHIP(A, D, ...)                                                                  \
  FA2_IF_##A(FA2_BWD(A, D) FA2_BWD_VARLEN(A, D, , __half) FA2_BWD_MOD(A, D, , __half))          \
  FA2_BF16_##A(FA2_BWD_BF16(A, D) FA2_BWD_VARLEN(A, D, _bf16, __nv_bfloat16) FA2_BWD_MOD(A, D, _bf16, __nv_bfloat16))
FA2_BWD_TILES(FA2_BWD_SHIP)

// The single pass (bwd_kv.cuh): dK, dV and dQ (fp32 atomics into dq_accum) in
// one kernel, then the dQ convert kernel (no tensor cores, on pre's grid);
// fa2_bwd_dkdvqdet_* is the same kernel with the dQ additions in a fixed order
// (Options.Deterministic; kDet: grid (B*Hkv, Tc), heads fastest, bwd_kv.cuh),
// before the same convert kernel.
// Each row ships fp16 and, on sm_80, bf16 twins (_bf16 after the size suffix), the same tile.
// The ordered twins: where the row's size says so (FA2_KVQ_DET_NC_<size>,
// FA2_KVQ_DET_C_<size>: large rows and D256's base row; D128's base row's 64
// keys per CTA double the chain of waits, and on the H200 its ordered form ran
// slower than the three kernels). The non-causal kernels run BwdKVQTraits' nc tile
// (the row's, or its FA2_BWD_KVQ_NC_GRIDS warp grids).
#define FA2_KVQ_DETNC_false(ARCH, D, SIZE, SFX, E)
#define FA2_KVQ_DETNC_true(ARCH, D, SIZE, SFX, E)                                                                  \
  extern "C" __global__ void __launch_bounds__(BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kThreads,        \
                                               BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kMinBlocks)      \
      FA2_CAT(FA2_CAT(fa2_bwd_dkdvqdet_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX)(const BwdParams p) {             \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_kv_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::nc, false, true, E, true>>(p); \
  }
#define FA2_KVQ_DETC_false(ARCH, D, SIZE, SFX, E)
#define FA2_KVQ_DETC_true(ARCH, D, SIZE, SFX, E)                                                                   \
  extern "C" __global__ void __launch_bounds__(BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kThreads,        \
                                               BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kMinBlocks)      \
      FA2_CAT(FA2_CAT(FA2_CAT(fa2_bwd_dkdvqdet_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX), _causal)(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_kv_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type, true, true, E, true>>(p); \
  }
#define FA2_BWD_KVQ(ARCH, D, SIZE, SFX, E)                                                                          \
  extern "C" __global__ void __launch_bounds__(BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kThreads,        \
                                               BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kMinBlocks)      \
      FA2_CAT(FA2_CAT(fa2_bwd_dkdvq_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX)(const BwdParams p) {                 \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_kv_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::nc, false, true, E>>(p); \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kThreads,        \
                                               BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kMinBlocks)      \
      FA2_CAT(FA2_CAT(FA2_CAT(fa2_bwd_dkdvq_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX), _causal)(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_kv_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type, true, true, E>>(p); \
  }                                                                                                                 \
  FA2_CAT(FA2_KVQ_DETNC_, FA2_KVQ_DET_NC_##SIZE)(ARCH, D, SIZE, SFX, E)                                          \
  FA2_CAT(FA2_KVQ_DETC_, FA2_KVQ_DET_C_##SIZE)(ARCH, D, SIZE, SFX, E)                                                                            \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads)                                                    \
      FA2_CAT(FA2_CAT(fa2_bwd_dqconv_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX)(const BwdParams p) {                \
    fa2::bwd_dq_convert_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type, E>(p);                            \
  }
#define FA2_BWD_KVQ_SHIP(A, D, SIZE, ...) \
  FA2_IF_##A(FA2_BWD_KVQ(A, D, SIZE, , __half)) FA2_BF16_##A(FA2_BWD_KVQ(A, D, SIZE, _bf16, __nv_bfloat16))
FA2_BWD_KVQ_TILES(FA2_BWD_KVQ_SHIP)
// For the head dims with the single pass alone (FA2_BWD_KVQ_ALONE): pre and
// the varlen pre, as FA2_BWD/FA2_BWD_VARLEN ship them, and per row the modified
// single pass (kMod; also the packed sequences' backward, modifiers or not)
// with, where the row has ordered twins, its ordered one, on the row's
// non-causal tile (causal is the window's right edge).
#define FA2_BWD_KVQ_MOD1(ARCH, D, SIZE, NAME, E, DET)                                                     \
  extern "C" __global__ void __launch_bounds__(BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kThreads, \
                                               BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::type::kMinBlocks) \
      NAME(const BwdParams p) {                                                                           \
    fa2::arch_entry<ARCH, BwdParams,                                                                      \
                    fa2::bwd_kv_kernel<BwdKVQTraits<ARCH, D, FA2_KVQ_LARGE_##SIZE>::nc, false, true, E, DET, true>>(p); \
  }
#define FA2_KVQ_MODDET_false(ARCH, D, SIZE, SFX, E)
#define FA2_KVQ_MODDET_true(ARCH, D, SIZE, SFX, E) \
  FA2_BWD_KVQ_MOD1(ARCH, D, SIZE, FA2_CAT(FA2_CAT(FA2_CAT(fa2_bwd_dkdvqdet_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX), _mod), E, true)
#define FA2_BWD_KVQ_MODS(ARCH, D, SIZE, SFX, E)                                                                        \
  FA2_BWD_KVQ_MOD1(ARCH, D, SIZE, FA2_CAT(FA2_CAT(FA2_CAT(fa2_bwd_dkdvq_sm##ARCH##_d##D, FA2_KVQ_SFX_##SIZE), SFX), _mod), E, false) \
  FA2_CAT(FA2_KVQ_MODDET_, FA2_KVQ_DET_NC_##SIZE)(ARCH, D, SIZE, SFX, E)
#define FA2_BWD_ALONE_E(ARCH, D, LARGE, BASE, SFX, E)                                                      \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads) fa2_bwd_pre_sm##ARCH##_d##D##SFX(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_pre_kernel<D, E>>(p);                                         \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(fa2::kPreThreads) fa2_bwd_pre_sm##ARCH##_d##D##SFX##_varlen(const BwdParams p) { \
    fa2::arch_entry<ARCH, BwdParams, fa2::bwd_pre_kernel<D, E, true>>(p);                                   \
  }                                                                                                         \
  FA2_BWD_KVQ_MODS(ARCH, D, LARGE, SFX, E)                                                                  \
  FA2_BWD_KVQ_MODS(ARCH, D, BASE, SFX, E)
#define FA2_BWD_ALONE_SHIP(A, D, LARGE, BASE) \
  FA2_IF_##A(FA2_BWD_ALONE_E(A, D, LARGE, BASE, , __half)) FA2_BF16_##A(FA2_BWD_ALONE_E(A, D, LARGE, BASE, _bf16, __nv_bfloat16))
FA2_BWD_KVQ_ALONE(FA2_BWD_ALONE_SHIP)
