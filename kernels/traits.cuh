// traits.cuh: THE tile table. One X(...) row per shipped (arch path, head dim)
// in FA2_FWD_TILES, FA2_BWD_TILES, FA2_BWD_KVQ_TILES, FA2_DECODE_TILES and
// FA2_SM90A_TILES; every size a kernel uses derives from them here, fwd.cu,
// bwd.cu, decode.cu and fa2_sm90a.cu instantiate exactly them, and tiles.cu turns them into the Go
// table internal/kernels/table_gen.go (whose test parses the X(...) rows).
// Each row carries its reason; the measurements behind the rows, and what was
// tried and not kept, are in docs/kernels.md.
//
// Notation (FA2 paper): a CTA owns Br query rows (one block of the Tr = ceil(Nq/Br)
// row blocks) and walks Tc = ceil(Nk/Bc) key/value blocks of Bc rows. Each warp
// owns MTiles = Br/(16*Warps) m16 row tiles, so a K/V fragment read from shared
// memory feeds MTiles tensor-core ops.
#pragma once

// Rows of D 16-bit elements in 16-byte chunks, XOR-swizzled by row so the 8
// rows of one ldmatrix fall in 8 bank groups without padding: chunk ^= row&7
// (D 64, 128, 256), chunk ^= (row>>1)&3 (D 32, 96: odd rows sit half a line over).
template <int D>
struct Swizzle {
  static_assert(D % 32 == 0, "head dim must be a multiple of 32");
  static constexpr int kChunks = D / 8;
  __device__ __forceinline__ static int key(int row) {
    return (kChunks % 8 == 0) ? (row & 7) : ((row >> 1) & 3);
  }
  // Element offset of chunk c of row `row`.
  __device__ __forceinline__ static int offset(int row, int c) {
    return row * D + ((c ^ key(row)) << 3);
  }
};

// Tile<...>: one kernel configuration.
//   Arch    75: Turing path (mma m16n8k8, global->register prefetch, <= 64 KiB smem);
//           80: sm_80+ path (mma m16n8k16, cp.async).
//   Stages  K/V shared-memory buffers on the sm_80 path: 2 = double buffer (next
//           block's copy overlaps the whole step), 1 = FA2-style single buffer
//           (V copy overlaps S=QK^T, next K copy overlaps softmax and PV).
//   Splits  each K/V block is consumed in Splits steps of Bc/Splits keys: S (and P)
//           registers scale with Bc/Splits, barriers and copies with Bc. Needs Stages 2
//           on sm_80 (one barrier per block) .
//   QRegs   Q fragments stay in registers for the whole loop (saves one ldmatrix
//           stream per step; costs D/4*MTiles registers).
//   MinBlocks  __launch_bounds__ occupancy hint (caps registers at 64K/(threads*MinBlocks)).
template <int Arch_, int D_, int Br_, int Bc_, int Warps_, int Stages_, int Splits_, bool QRegs_, int MinBlocks_>
struct Tile {
  static constexpr int kArch = Arch_, kD = D_, kBr = Br_, kBc = Bc_, kWarps = Warps_;
  static constexpr int kStages = Stages_, kSplits = Splits_, kMinBlocks = MinBlocks_;
  static constexpr int kBs = kBc / kSplits;  // keys per softmax step
  static constexpr bool kQRegs = QRegs_;
  static constexpr int kThreads = kWarps * 32;
  // Br = 8 x Warps: each warp owns 8 rows as the mma's n8 (n8.cuh's WarpN8;
  // fwd.cuh's fwd_n8), where an m16 tile's O does not fit the registers.
  static constexpr bool kN8 = kBr == 8 * kWarps;
  static constexpr int kMTiles = kN8 ? 0 : kBr / (16 * kWarps);
  static_assert(kN8 || (kMTiles >= 1 && kBr == kMTiles * 16 * kWarps), "Br must be 16*Warps*MTiles (or 8*Warps)");
  static_assert(!kN8 || (Arch_ == 75 && Splits_ == 1), "the n8 forward: Turing, one split");
  static_assert(kBs * kSplits == kBc && kBs % 16 == 0, "Bc/Splits must be a multiple of 16 (k16 steps of PV)");
  static_assert(Splits_ == 1 || Arch_ == 75 || Stages_ == 2, "sm_80 splits need the double buffer");
  static_assert(Arch_ == 75 || Arch_ == 80, "arch path is 75 or 80");
  static_assert(Arch_ == 80 || Stages_ == 1, "Turing path prefetches through registers");

  static constexpr int kTileQ = kBr * kD;      // elements
  static constexpr int kTileKV = kBc * kD;
  // Q | K[Stages] | V[Stages]; except that with Q in registers on the Turing
  // path's m16 form Q is staged through the K/V area (and O at the end), which
  // is then max(Q, K+V): that is what lets large tiles fit 64 KiB. (The n8
  // form keeps its Q rows: a warp's O goes there at the end.)
  static constexpr bool kQAliasKV = Arch_ == 75 && QRegs_ && !kN8;
  static constexpr int kSmemElems =
      kQAliasKV ? (kTileQ > 2 * kTileKV ? kTileQ : 2 * kTileKV) : kTileQ + 2 * kStages * kTileKV;
  static constexpr int kSmemBytes = kSmemElems * 2;
  static_assert(Arch_ != 75 || kSmemBytes <= 64 * 1024, "Turing: at most 64 KiB of shared memory per CTA");
  static_assert(Arch_ != 80 || kSmemBytes <= 99 * 1024, "sm_86/89 allow at most 99 KiB per CTA");
};

// FA2_FWD_TILES(X): THE list of shipped forward kernels, one
// X(arch, d, Br, Bc, warps, stages, splits, qregs, minblocks) per (arch path,
// head dim), expanded into FwdTraits below, fwd.cu's kernels and tiles.cu's
// tables. Every sm_80 row also ships bf16 (fa2_fwd_sm80_d{D}_bf16[_causal]).
//
// Turing (T4: 40 SMs, 64 KiB smem/SM, 64K regs/SM): 8 warps of 16 rows, one
// CTA of 256 threads with up to 255 registers, which the next K/V block held
// in registers (Turing has no cp.async) needs on top of O and S. Q in
// registers lets Q share the K/V area (smem max(Q, K+V)). D256: every m16 tile
// spilled 24-480 B, so its warps own 8 rows as the mma's n8 (n8.cuh).
//
// sm_80+: <= 99 KiB (sm_86/89's limit) so one table serves A100, sm_86/89 and
// H100/H200. 4 warps x 32 rows: each K/V fragment feeds two mmas; 16-row warps
// were shared-memory bound (D128 N 2048, H200: 280 TFLOP/s, 0.85x SDPA flash).
// Two CTAs per SM where shared memory allows (every D on sm_90, D <= 96 on
// sm_80, D32 on sm_86/89) overlap each other's softmax and barriers. Stages 2:
// the next block's cp.async runs under a whole step. Splits: S at Bc/Splits keys.
#define FA2_FWD_TILES(X)                                                                                              \
  X(75, 32, 128, 64, 8, 1, 1, true, 1)    /* D32: 8 KiB smem (a 128-register cap for 2 CTAs/SM spilled) */           \
  X(75, 64, 128, 64, 8, 1, 1, true, 1)    /* D64: 16 KiB smem, ~160 regs */                                          \
  X(75, 96, 128, 64, 8, 1, 1, true, 1)    /* D96: 24 KiB smem, ~210 regs */                                          \
  X(75, 128, 128, 64, 8, 1, 1, false, 1)  /* D128: 128x64, 8 warps (the best Turing FA2 shape); Q in registers       \
                                             would spill, so Q|K|V = 64 KiB exactly */                               \
  X(75, 256, 64, 32, 8, 1, 1, true, 1)    /* D256: 8 warps of 8 rows (n8), Q^T's fragments in registers (32):     \
                                             1.03-1.04x (H200, forced sm_75); Q|K|V = 64 KiB */                      \
  X(80, 32, 128, 128, 4, 2, 2, true, 1)   /* D32: Q fragments in registers (8), 40 KiB smem */                       \
  X(80, 64, 128, 128, 4, 2, 2, true, 1)   /* D64: Q fragments in registers (32), 80 KiB smem; 326 TFLOP/s at N 8192, H200 */ \
  X(80, 96, 128, 64, 4, 2, 1, false, 1)   /* D96: 72 KiB smem */                                                     \
  X(80, 128, 128, 64, 4, 2, 2, false, 1)  /* D128: O takes 128 regs; unsplit 128x64 spilled 44 B; 358 TFLOP/s at N 8192, H200 */ \
  X(80, 256, 64, 64, 4, 1, 1, false, 1)   /* D256: O is 128 regs at 16 rows/warp, 64x64 single-buffered = 96 KiB */

// FwdTraits<Arch, D>::type is the configuration that ships.
template <int Arch, int D> struct FwdTraits;
#define FA2_FWD_TRAITS(A, D, BR, BC, W, S, SP, QR, MB) \
  template <> struct FwdTraits<A, D> { using type = Tile<A, D, BR, BC, W, S, SP, QR, MB>; };
FA2_FWD_TILES(FA2_FWD_TRAITS)
#undef FA2_FWD_TRAITS

// ---------------------------------------------------------------------------
// Backward tiles (bwd.cuh): the dK/dV kernel owns Bc key rows and streams Br
// query rows per step, the dQ kernel owns Br query rows and streams Bc keys.
//
// BwdTile<Arch, D, Rows, Cols, Warps, Stages, Chunk, Regs, MinBlocks, ColGroups, KV>:
//   Rows    rows owned and accumulated (Bc for dK/dV, Br for dQ)
//   Cols    rows streamed per step (Br for dK/dV, Bc for dQ)
//   Stages  streamed buffers on the sm_80 path (2: the next block's cp.async
//           overlaps the whole step); the Turing path loads through registers, 1
//   Chunk   streamed rows per sub-step: S and dP (fp32) live in registers Chunk
//           columns at a time, so registers scale with Chunk, barriers with Cols
//   Regs    the owned operands (K, V or Q, dO) stay in registers as mma A fragments
//   ColGroups  warps per owned row (1, or 2 at D256): each accumulates D/ColGroups
//           columns of its rows' dK, dV or dQ, so the accumulators fit a thread's
//           registers, and computes Chunk/ColGroups columns of the chunk's S and dP
//           (over all of D); the P and dS fragments are put together through
//           shared memory (gemm.cuh's share_put/get)
//   KV      true for the dK/dV kernel (its smem also holds L and Di of the
//           streamed query rows, per stage)
template <int Arch_, int D_, int Rows_, int Cols_, int Warps_, int Stages_, int Chunk_, bool Regs_, int MinBlocks_, int ColGroups_, bool KV_>
struct BwdTile {
  static constexpr int kArch = Arch_, kD = D_, kRows = Rows_, kCols = Cols_, kWarps = Warps_;
  static constexpr int kStages = Stages_, kChunk = Chunk_, kMinBlocks = MinBlocks_;
  static constexpr bool kRegs = Regs_, kKV = KV_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kColGroups = ColGroups_, kRowWarps = kWarps / kColGroups, kColsPerWarp = kD / kColGroups;
  static constexpr int kMTiles = kRows / (16 * kRowWarps);
  static_assert(kRowWarps * kColGroups == kWarps, "column groups must tile the warps");
  // A warp's columns start at a multiple of 64 (8 chunks, the swizzle's span), so
  // its accumulators' slab is the whole-row tile's at a plain offset.
  static_assert(kColGroups == 1 || kColsPerWarp % 64 == 0, "column groups of whole 64-column slabs");
  static_assert(kMTiles >= 1 && kRows == kMTiles * 16 * kRowWarps, "Rows must be 16*(Warps/ColGroups)*MTiles");
  static_assert(kCols % kChunk == 0 && kChunk % 16 == 0, "Chunk must divide Cols and be a multiple of 16");
  static_assert(Arch_ == 75 || Arch_ == 80, "arch path is 75 or 80");
  static_assert(Arch_ == 80 || Stages_ == 1, "Turing path loads through registers");
  static_assert(Stages_ == 1 || Stages_ == 2, "one or two streamed buffers");
  // Owned tiles (2 x Rows x D, also the fp16 staging of the results) | streamed
  // tiles (Stages x 2 x Cols x D) | dK/dV only: L and Di (Stages x 2 x Cols fp32).
  static constexpr int kOwnElems = 2 * kRows * kD;
  static constexpr int kStreamElems = 2 * kCols * kD;  // per stage
  static constexpr int kStatsBytes = KV_ ? 2 * kCols * 4 : 0;  // per stage
  // ColGroups > 1: last, the chunk's A fragments shared across each row group's
  // warps (P^T and dS^T for dK/dV, dS for dQ; gemm.cuh's share_put/get).
  static_assert(kColGroups == 1 || kChunk % (8 * kColGroups) == 0, "whole n8 tiles per column group");
  static constexpr int kShareBytes = kColGroups > 1 ? (KV_ ? 2 : 1) * kRowWarps * kMTiles * (kChunk / 8) * 32 * 8 : 0;
  static constexpr int kShareOffset = 2 * (kOwnElems + kStages * kStreamElems) + kStages * kStatsBytes;
  static constexpr int kSmemBytes = kShareOffset + kShareBytes;
  static_assert(Arch_ != 75 || kSmemBytes <= 64 * 1024, "Turing: at most 64 KiB of shared memory per CTA");
  static_assert(Arch_ != 80 || kSmemBytes <= 99 * 1024, "sm_86/89 allow at most 99 KiB per CTA");
};

// FA2_BWD_TILES(X): THE list of shipped three-kernel backwards, one
// X(arch, d, (Bc, Br, warps, stages, chunk, regs, minblocks, colgroups), (Br, Bc, warps, stages, chunk, regs, minblocks, colgroups))
// per (arch path, head dim): the dK/dV tile, then the dQ tile (each pair also
// ships a pre kernel); every sm_80 row also ships bf16. On the sm_80 path D 256
// has no row: its backward is the single pass alone (FA2_BWD_KVQ_ALONE).
//
// Turing: single-buffered, <= 64 KiB. dK/dV warps own 16 key rows (the two
// fp32 accumulators are D/2 registers each per thread); K, V fragments in
// registers where D <= 64. 8 resident warps per SM at every D but 128 and 256
// (FA2_SM75_UNDER8 says why). D 256: all 256 columns of 16 rows would be 256
// accumulator registers, so two warps share each 16 rows, 128 columns each
// (ColGroups 2), each computing half the chunk's S^T and dP^T and swapping
// the P^T and dS^T fragments through shared memory: 1.17-1.24x as fast as
// both computing all of them (H200, forced sm_75 path). dQ streams 16 keys:
// the shared fragments leave no room for 32 in 64 KiB.
// D128 on 8 warps the same way ran 0.54-0.63x the 4-warp rows below.
//
// sm_80+: <= 99 KiB, double-buffered streams. dK/dV: 128 key rows per CTA so
// each streamed Q/dO block feeds 128 keys; 8 warps x 16 key rows, except D64:
// 4 warps x 32 key rows, each Q/dO fragment feeding two mmas (16-row warps
// were shared-memory bound); at D >= 96 two 32-row dK and dV accumulators
// would not fit 255 registers. dQ: 4 warps x 32 rows as the forward; its fp32
// dQ is D registers per thread, so S and dP go 16 keys at a time at D >= 96.
//
// Every row and dtype also ships the modified dK/dV and dQ
// (fa2_bwd_{dkdv,dq}_sm{A}_d{D}[_bf16]_mod, bwd.cuh's kMod) on the same tiles:
// one pair with the window, softcap and ALiBi as run-time flags (24 symbols,
// not the forward's 96): 1.5-1.7x the plain kernels' time with a softcap or
// ALiBi (N 8192 causal, H200), no spills.
#define FA2_BWD_TILES(X)                                                                                              \
  X(75, 32, (128, 64, 8, 1, 32, true, 1, 1), (128, 64, 8, 1, 32, true, 1, 1))    /* 24.5 KiB | 24 KiB */                  \
  X(75, 64, (128, 64, 8, 1, 32, true, 1, 1), (128, 64, 8, 1, 32, true, 1, 1))    /* 48.5 KiB | 48 KiB */                  \
  X(75, 96, (128, 32, 8, 1, 32, false, 1, 1), (128, 32, 8, 1, 32, false, 1, 1))  /* 60.25 KiB: K,V 48 KiB leave room for \
                                                                              32 query rows | 60 KiB */             \
  X(75, 128, (64, 32, 4, 1, 16, false, 1, 1), (64, 64, 4, 1, 32, false, 1, 1))   /* 48.25 KiB: 128 key rows of K,V alone  \
       would be 64 KiB; 32-query chunks spilled | 64 KiB exactly (Q,dO | K,V), like the forward D128.            \
       Both: 4 resident warps, 1 CTA/SM (FA2_SM75_UNDER8 says why). */                                         \
  X(75, 256, (32, 16, 4, 1, 16, false, 1, 2), (32, 16, 4, 1, 16, false, 1, 2)) /* 50.125 KiB | 49 KiB: 2 column     \
       groups (ColGroups), 4 resident warps, 1 CTA/SM (FA2_SM75_UNDER8) */                                    \
  X(80, 32, (128, 64, 8, 2, 32, true, 1, 1), (128, 64, 4, 2, 32, true, 1, 1))    /* 33 KiB | 32 KiB, Q and dO fragments   \
                                                                              in registers (16) */                  \
  X(80, 64, (128, 64, 4, 2, 16, false, 1, 1), (128, 64, 4, 2, 32, false, 1, 1))  /* 65 KiB, 2 CTAs/SM on sm_80/90: dK/dV 13-17% \
       faster than 8 warps x 16 rows (H200); 32-query chunks spilled 16 B | 64 KiB */                         \
  X(80, 96, (128, 64, 8, 2, 32, false, 1, 1), (128, 64, 4, 2, 16, false, 1, 1))  /* 97 KiB | 96 KiB */                    \
  X(80, 128, (128, 32, 8, 2, 32, false, 1, 1), (128, 32, 4, 2, 16, false, 1, 1)) /* 96.5 KiB: 64 query rows per step      \
                                                                              would not fit twice | 96 KiB */

// BwdKVTraits<Arch, D>::type and BwdQTraits<Arch, D>::type ship.
template <int Arch, int D> struct BwdKVTraits;
template <int Arch, int D> struct BwdQTraits;
#define FA2_ARGS(...) __VA_ARGS__
#define FA2_BWD_TRAITS(A, D, KV, Q)                                                        \
  template <> struct BwdKVTraits<A, D> { using type = BwdTile<A, D, FA2_ARGS KV, true>; }; \
  template <> struct BwdQTraits<A, D> { using type = BwdTile<A, D, FA2_ARGS Q, false>; };
FA2_BWD_TILES(FA2_BWD_TRAITS)
#undef FA2_BWD_TRAITS

// KVRegs: which of a single-pass CTA's K and V rows its warps keep in
// registers as A fragments (BwdKVQTile's Regs): none, both, or V alone (K is
// also dQ's B operand, so it stays in shared memory either way).
enum KVRegs { kRegsNone, kRegsKV, kRegsV };

// ---------------------------------------------------------------------------
// The single pass (bwd_kv.cuh, FA2's 2-D warp layout): a CTA owns Bc key rows
// and streams Br query rows per step, each product on its own warp grid.
//
// BwdKVQTile<Arch, D, Bc, Br, Warps, SK, VK, QM, Regs, Stages, MinBlocks>:
//   SK      warps along the keys for S^T and dP^T (Warps/SK along the queries)
//   VK      warps along the keys for dK and dV (Warps/VK along the head dim)
//   QM      warps along the queries for dQ (Warps/QM along the head dim)
//   Regs    which of the warp's K and V rows of S^T and dP^T stay in registers
//           as A fragments (KVRegs); one in registers is only staged in shared
//           memory, in the last stream buffer, before the first step's copies
//   Stages  Q | dO buffers: 2, the next step's copies overlap the whole step;
//           1, they are issued once dK's product has read Q and overlap dQ's
template <int Arch_, int D_, int Bc_, int Br_, int Warps_, int SK_, int VK_, int QM_, KVRegs Regs_, int Stages_, int MinBlocks_>
struct BwdKVQTile {
  static constexpr int kArch = Arch_, kD = D_, kBc = Bc_, kBr = Br_, kWarps = Warps_, kStages = Stages_, kMinBlocks = MinBlocks_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr KVRegs kRegs = Regs_;
  static constexpr bool kKRegs = Regs_ == kRegsKV, kVRegs = Regs_ != kRegsNone;
  static constexpr int kSK = SK_, kVK = VK_, kQM = QM_;
  static constexpr int kSRows = Bc_ / SK_, kSCols = Br_ / (Warps_ / SK_), kSMT = kSRows / 16;
  static constexpr int kVRows = Bc_ / VK_, kVCols = D_ / (Warps_ / VK_), kVMT = kVRows / 16;
  static constexpr int kQRows = Br_ / QM_, kQCols = D_ / (Warps_ / QM_), kQMT = kQRows / 16;
  static_assert(Arch_ == 80, "cp.async streams: sm_80 path only");
  static_assert(Stages_ == 1 || Stages_ == 2, "one or two Q | dO buffers");
  static_assert(Warps_ % SK_ == 0 && Warps_ % VK_ == 0 && Warps_ % QM_ == 0, "warp grids must tile the warps");
  static_assert(kSRows * SK_ == Bc_ && kSCols * (Warps_ / SK_) == Br_ && kSRows % 16 == 0 && kSCols % 16 == 0,
                "S^T warp tiles: whole m16 rows and k16 query pairs");
  static_assert(kVRows * VK_ == Bc_ && kVCols * (Warps_ / VK_) == D_ && kVRows % 16 == 0 && kVCols % 16 == 0,
                "dK/dV warp tiles: whole m16 rows and column pairs");
  static_assert(kQRows * QM_ == Br_ && kQCols * (Warps_ / QM_) == D_ && kQRows % 16 == 0 && kQCols % 16 == 0,
                "dQ warp tiles: whole m16 rows and column pairs");
  static constexpr int kOwnElems = (kVRegs ? 1 : 2) * Bc_ * D_;  // K | V, or K alone (V staged)
  static constexpr int kStreamElems = 2 * Br_ * D_;               // Q | dO, per stage
  static constexpr int kTileS = Bc_ * Br_;                        // P^T, dS^T
  static_assert(!kVRegs || Bc_ * D_ <= kStreamElems, "V is staged in the last stream buffer");
  static_assert(Bc_ * D_ <= kStages * kStreamElems, "dV is staged in the stream area");
  // (L | Di) for two steps, whatever the stages: the next step's are stored under dQ.
  static constexpr int kSmemBytes = 2 * (kOwnElems + kStages * kStreamElems + 2 * kTileS) + 2 * 2 * Br_ * 4;
  // Above 99 KiB (sm_86/89's opt-in limit) a tile is a large row: it runs only
  // where the opt-in limit allows (A100 163 KiB, H100/H200 227 KiB) and needs a
  // <= 99 KiB sibling for the other parts (FA2_BWD_KVQ_TILES).
  static constexpr bool kLarge = kSmemBytes > 99 * 1024;
  static_assert(kSmemBytes <= 227 * 1024, "H100/H200 allow at most 227 KiB per CTA");
};

// FA2_BWD_KVQ_TILES(X): THE list of the single pass's kernels, one
// X(arch, d, size, Bc, Br, warps, SK, VK, QM, regs, stages, minblocks) per
// (head dim, size). Each row ships fa2_bwd_dkdvq_sm80_d{D}{sfx}[_causal] (dK,
// dV and dQ by atomics: the default backward), fa2_bwd_dqconv_sm80_d{D}{sfx}
// (the convert kernel: the accumulator's order is the tile's) and, where the
// size says so, its ordered twin fa2_bwd_dkdvqdet_sm80_d{D}{sfx}[_causal]
// (kDet: the dQ additions in a fixed order, Options.Deterministic). Every row
// also ships bf16 twins (_bf16 after the size suffix).
// size: base (<= 99 KiB, every sm_80+ part; no suffix), base_det (the same
// with ordered twins, for a head dim without the three kernels), large
// (> 99 KiB, suffix _large, with ordered twins; FA2's own sm_80 tiles use the
// room), large_causaldet (the same with the causal ordered twin alone). Per
// head dim at most one row of each, the large one first; a device runs the
// first row whose shared memory fits its opt-in limit per block (A100 163
// KiB, H100/H200 227 KiB; sm_86/89 99 KiB keep the base row;
// internal/kernels.LargeFits). Head dims without a row run the three kernels
// on both paths, as does Turing (these kernels stream with cp.async).
// The dQ accumulator in fragment order (32 consecutive floats per atomic)
// makes it pay: D128 base kernel 11.3 ms, 18.5 in the mma C layout, the three
// kernels 13.2 (N 8192, H200).
//   D128 large: FA2's sm_80 D128 shape; 128 keys per CTA halve the atomics
//        per FLOP: whole backward 1.08x the three kernels (N 2048, H200). K, V
//        in shared memory (in registers beside 128 dK/dV accumulators they
//        would not fit). Non-causal grid: FA2_BWD_KVQ_NC_GRIDS.
//   D128 base: K, V fragments in registers. No ordered twin: 64 keys per CTA
//        double the chain of waits, slower than the three kernels (H200).
//   D64 large: FA2's D64 shape: 4-9% faster than 192 x 64 (H200). A 128-row
//        query block spans two pre CTAs (kPreRows 64): the last zeroes it
//        whole. Causal ordered twin only: without a mask the three kernels
//        measured as fast. No base row: 128 x 64 spilled causal, its
//        spill-free variants ran 0.77-0.98x the three kernels (H200).
//   D256 large: the smallest tile with whole 16 x 16 S^T warp tiles; dK/dV
//        2x4 (128 accumulator registers), dQ 1x8; 0.79-0.84x SDPA flash (H200).
//   D256 base: FA2's sm_86 D256 shape; one Q|dO stage (the next copies issued
//        once dK's product has read it: they overlap dQ), V's fragments in
//        registers. Two stages fit nothing in 99 KiB; other grids spilled 4-20 B.
#define FA2_BWD_KVQ_TILES(X)                                                                        \
  X(80, 128, large, 128, 64, 8, 2, 4, 2, kRegsNone, 2, 1) /* 161 KiB (A100, H100/H200) */ \
  X(80, 128, base, 64, 64, 8, 4, 2, 2, kRegsKV, 2, 1)    /* 97 KiB */                     \
  X(80, 64, large_causaldet, 128, 128, 8, 2, 4, 4, kRegsNone, 2, 1) /* 162 KiB (A100, H100/H200) */ \
  X(80, 256, large, 64, 32, 8, 4, 2, 1, kRegsNone, 2, 1)  /* 136.5 KiB (A100, H100/H200) */ \
  X(80, 256, base_det, 32, 64, 8, 2, 1, 1, kRegsV, 1, 1)  /* 89 KiB (sm_86/89) */

// FA2_BWD_KVQ_ALONE(X): X(arch, d, large size, base size) for the head dims whose only
// backward is the single pass (no FA2_BWD_TILES row), so both rows exist (every
// device runs one). They ship fa2_bwd_pre_sm{A}_d{D}[_bf16][_varlen] and, per
// row, the modified single pass fa2_bwd_dkdvq_sm{A}_d{D}{sfx}[_bf16]_mod
// (bwd_kv.cuh's kMod: window, softcap, ALiBi at run time; also these head
// dims' varlen backward) and, with ordered twins, fa2_bwd_dkdvqdet_..._mod.
#define FA2_BWD_KVQ_ALONE(X) X(80, 256, large, base_det)

// size -> symbol suffix and BwdKVQTraits' Large key; a base row must fit 99 KiB
// and a large row must need more (else it is the base row).
#define FA2_KVQ_SFX_base
#define FA2_KVQ_SFX_base_det
#define FA2_KVQ_SFX_large _large
#define FA2_KVQ_SFX_large_causaldet _large
#define FA2_KVQ_LARGE_base false
#define FA2_KVQ_LARGE_base_det false
#define FA2_KVQ_LARGE_large true
#define FA2_KVQ_LARGE_large_causaldet true
// Whether a row ships its ordered twin without a mask (_NC) and causal (_C):
// large rows both, unless measured slower than the three kernels (large_causaldet).
#define FA2_KVQ_DET_NC_base false
#define FA2_KVQ_DET_NC_base_det true
#define FA2_KVQ_DET_NC_large true
#define FA2_KVQ_DET_NC_large_causaldet false
#define FA2_KVQ_DET_C_base false
#define FA2_KVQ_DET_C_base_det true
#define FA2_KVQ_DET_C_large true
#define FA2_KVQ_DET_C_large_causaldet true
#define FA2_CAT_(a, b) a##b
#define FA2_CAT(a, b) FA2_CAT_(a, b)

// FA2_BWD_KVQ_NC_GRIDS(X): X(arch, d, size, SK, VK): the non-causal kernels'
// S^T and dK/dV warp grids (default and ordered twin) where they differ from
// the row's. D128 large: S^T 4x2 with dK/dV 2x4 (FA2's grid for S) reads 64
// ldmatrix per step for S^T and dP^T instead of 80: whole backward 2.510 ->
// 2.363 ms at N 2048 (H200); causal it spills 16 B on sm_90 and measured 1-3%
// slower, so the causal kernels keep the row's. Bc, Br, warps and the dQ grid
// stay the row's, so shared memory, the dQ accumulator's order, the convert
// kernel and the host see one tile.
#define FA2_BWD_KVQ_NC_GRIDS(X) X(80, 128, large, 4, 2)

// BwdKVQNCGrid<Arch, D, Large, Row>::type: the non-causal kernels' tile.
template <int Arch, int D, bool Large, class Row> struct BwdKVQNCGrid { using type = Row; };
#define FA2_BWD_KVQ_NC_GRID(A, D, SIZE, SK, VK)                                                              \
  template <class Row> struct BwdKVQNCGrid<A, D, FA2_KVQ_LARGE_##SIZE, Row> {                                  \
    using type = BwdKVQTile<A, D, Row::kBc, Row::kBr, Row::kWarps, SK, VK, Row::kQM, Row::kRegs, Row::kStages, Row::kMinBlocks>; \
  };
FA2_BWD_KVQ_NC_GRIDS(FA2_BWD_KVQ_NC_GRID)
#undef FA2_BWD_KVQ_NC_GRID

// BwdKVQTraits<Arch, D, Large>: type, the row (the causal kernels' tile, and
// the convert kernel's), and nc, the non-causal kernels' tile.
template <int Arch, int D, bool Large> struct BwdKVQTraits;
#define FA2_BWD_KVQ_TRAITS(A, D, SIZE, ...)                                                            \
  template <> struct BwdKVQTraits<A, D, FA2_KVQ_LARGE_##SIZE> {                                          \
    using type = BwdKVQTile<A, D, __VA_ARGS__>;                                                          \
    using nc = BwdKVQNCGrid<A, D, FA2_KVQ_LARGE_##SIZE, type>::type;                                     \
    static_assert(type::kLarge == FA2_KVQ_LARGE_##SIZE, "a base row fits 99 KiB, a large row needs more"); \
    static_assert(nc::kSmemBytes == type::kSmemBytes && nc::kQM == type::kQM && nc::kThreads == type::kThreads, \
                  "the non-causal grid keeps the row's shared memory, threads and dQ order");          \
  };
FA2_BWD_KVQ_TILES(FA2_BWD_KVQ_TRAITS)
#undef FA2_BWD_KVQ_TRAITS

// Decode tiles (decode.cuh: the KV-cache forward, split-KV). A CTA owns one
// (batch, kv head, split) and one m16 tile of packed query rows (Nq x Hq/Hkv),
// and walks its key blocks of Bc rows; each warp takes Bw = Bc/Warps keys of
// every block. Decode reads each K/V byte once for a few rows, so the tiles are
// sized for bytes in flight, not for mma reuse.
//
// DecodeTile<Arch, D, Bc, Warps, Stages, Rows>:
//   Stages  K/V buffers on the sm_80 path (a cp.async ring: Stages-1 blocks in
//           flight while one is consumed); the Turing path holds one block in
//           shared memory and the next in registers (Stages 1).
//   Rows    packed query rows per CTA: 16, the mma's m16 (Q as A, O in D/2
//           fp32 per lane), or 8, its n8 (n8.cuh's WarpN8: keys as
//           the 16 rows, Q^T from shared memory, O^T in D/4 fp32 per lane),
//           where registers hold no m16 O beside the prefetch.
// Shared memory is the K/V buffers (and with Rows 8 the staged Q rows),
// reused at the end for the warps' fp32 O and LSE (merged by LSE),
// whichever is larger.
template <int Arch_, int D_, int Bc_, int Warps_, int Stages_, int Rows_>
struct DecodeTile {
  static constexpr int kArch = Arch_, kD = D_, kBc = Bc_, kWarps = Warps_, kStages = Stages_;
  static constexpr int kThreads = kWarps * 32;
  // Two CTAs per SM where shared memory holds them (H100/H200, T4): at 4 warps
  // that leaves every thread up to 255 registers, and saying so keeps ptxas
  // from capping the kernel at 168 (D128) and spilling the run-time softcap
  // and ALiBi code.
  static constexpr int kMinBlocks = 2;
  static constexpr int kRows = Rows_;  // packed query rows per CTA (one m16 or n8 tile)
  static_assert(Rows_ == 16 || Rows_ == 8, "packed rows are one m16 or one n8 tile");
  static constexpr int kBw = kBc / kWarps;  // keys per warp per block
  static_assert(kBw % 16 == 0 && kBw * kWarps == kBc, "each warp takes a multiple of 16 keys of a block");
  static_assert(Arch_ == 75 || Arch_ == 80, "arch path is 75 or 80");
  static_assert(Arch_ == 80 || Stages_ == 1, "Turing path prefetches through registers");
  static constexpr int kKVBytes = kStages * 2 * kBc * kD * 2;
  static constexpr int kQBytes = Rows_ == 8 ? Rows_ * kD * 2 : 0;  // the staged Q rows, after K/V (Rows 8)
  // The Turing path prefetches the next block's K and V into registers during
  // a step; where that leaves no room (Rows 8: D256, 128 registers for both)
  // only K's, V's loads follow the step (a T4 SM needs ~8 KB in flight).
  static constexpr bool kPrefetchV = !(Arch_ == 75 && Rows_ == 8);
  // The warps' merge (decode.cuh): fp32 O rows of kMergeLD floats (4 of pad spread
  // the 8 rows of one store over the banks), then one LSE per row; in
  // kMergePasses passes over the head-dim columns where the whole rows would
  // need more than the K/V buffers (so the merge never sets the CTA's shared
  // memory: on Turing two 32 KiB CTAs of 4 warps then share an SM).
  static constexpr int kMergeBytesFor(int passes) { return kWarps * kRows * (kD / passes + 4) * 4 + kWarps * kRows * 4; }
  static constexpr int kMergePasses = kMergeBytesFor(1) <= kKVBytes + kQBytes ? 1 : 2;
  static_assert(kD % (8 * kMergePasses) == 0, "a merge pass takes whole 8-column groups");
  static constexpr int kMergeLD = kD / kMergePasses + 4;
  static constexpr int kMergeBytes = kMergeBytesFor(kMergePasses);
  static constexpr int kSmemBytes = kKVBytes + kQBytes > kMergeBytes ? kKVBytes + kQBytes : kMergeBytes;
  static_assert(Arch_ != 75 || kSmemBytes <= 64 * 1024, "Turing: at most 64 KiB of shared memory per CTA");
  static_assert(Arch_ != 80 || kSmemBytes <= 99 * 1024, "sm_86/89 allow at most 99 KiB per CTA");
};

// FA2_DECODE_TILES(X): THE list of shipped decode kernels, one
// X(arch, d, Bc, warps, stages, rows) per (arch path, head dim): fa2_decode_sm{A}_d{D}
// (causal, the window, softcap and ALiBi are parameters; the last CTAs of a
// split group to finish merge the splits, decode.cuh); every sm_80 row ships bf16 twins
// (_bf16), as the forward's.
//
// Turing (T4: 320 GB/s over 40 SMs, ~8 KB per SM in flight covers the latency):
// one block in shared memory, the next in registers (48-64 registers per
// thread), 16-32 KiB per block in flight. D256: rows of 512 B make the
// prefetch 128 registers at any warp count (16 keys per warp), which leaves
// no room for an m16 tile's O (128 more): its row packs 8 rows (O^T 64).
// sm_80+: a 3-4 deep cp.async ring of <= 96 KiB, 2-3 blocks (48-64 KiB) in
// flight per CTA; two such CTAs fit an H100/H200 SM (227 KiB), one an A100's or
// an sm_86/89 SM's (resources.md). At D128, B 1, six other tiles (Bc 16-64,
// 1-4 warps, 2-6 stages, 2-6 CTAs per SM) all ran slower on contiguous caches,
// and 4 or 6 stages within noise (H200). D256 runs 2 warps so that a warp
// still takes 16 keys of a 32-key block.
#define FA2_DECODE_TILES(X)                                                                       \
  X(75, 32, 128, 4, 1, 16)  /* 16 KiB: 32 keys per warp; the prefetch is 32 registers */          \
  X(75, 64, 128, 4, 1, 16)  /* 32 KiB; prefetch 64 registers */                                   \
  X(75, 96, 64, 4, 1, 16)   /* 24 KiB (merge in two passes); prefetch 64 registers (D96: 12 of 16 lanes copy) */ \
  X(75, 128, 64, 4, 1, 16)  /* 32 KiB (merge in two passes: whole rows would take 33 KiB and leave \
                               one CTA of 4 warps per T4 SM); prefetch 64 registers */ \
  X(75, 256, 32, 2, 1, 8)   /* 36 KiB (K, V and Q); prefetch 128 registers, O^T 64 */             \
  X(80, 32, 128, 4, 4, 16)  /* 64 KiB, 3 x 16 KiB in flight */                                    \
  X(80, 64, 128, 4, 3, 16)  /* 96 KiB, 2 x 32 KiB in flight */                                    \
  X(80, 96, 64, 4, 4, 16)   /* 96 KiB, 3 x 24 KiB in flight */                                    \
  X(80, 128, 64, 4, 3, 16)  /* 96 KiB, 2 x 32 KiB in flight; 1.01-1.09x cuDNN from 4k entries (B 1, H200) */ \
  X(80, 256, 32, 2, 3, 16)  /* 96 KiB, 2 x 32 KiB in flight */

// DecodeTraits<Arch, D>::type ships.
template <int Arch, int D> struct DecodeTraits;
#define FA2_DECODE_TRAITS(A, D, BC, W, S, R) \
  template <> struct DecodeTraits<A, D> { using type = DecodeTile<A, D, BC, W, S, R>; };
FA2_DECODE_TILES(FA2_DECODE_TRAITS)
#undef FA2_DECODE_TRAITS

// ---------------------------------------------------------------------------
// setmaxnreg moves registers within what a CTA got at launch: 65536 / threads per
// thread, rounded down to 8 (168 at 384 threads, 128 at 512, 96 at 640). Asking
// for more, setmaxnreg.inc waits forever.
constexpr int sm90_launch_regs(int threads) { return 65536 / threads / 8 * 8; }

// Hopper (sm_90a) forward tiles (fwd_sm90.cuh; fa2_sm90a.cubin, nvcc 12.4 of
// kernels/cuda12.sh, SASS for sm_90a only): dense fp16 and bf16 forwards on an
// H100/H200 unless ForcePath(80). One CTA = one producer warpgroup (TMA loads) + Br/64
// consumer warpgroups, each keeping S (Bc/2 fp32), O (D/2 fp32) and P (Bc/4
// 16-bit pairs) of its 64 rows in registers; persistent (kPersistent: one CTA per SM
// walks the tiles). Registers: what the CTA got at launch (sm90_launch_regs), then
// the producer drops to kProducerRegs and the consumers take the rest (multiples of 8).
template <int D_, int Br_, int Bc_, int Stages_, int SM80CausalMaxNk_, bool Overlap_ = true, bool StageO_ = false>
struct Tile90 {
  static constexpr int kArch = 90, kD = D_, kBr = Br_, kBc = Bc_, kStages = Stages_;
  // The intra-warpgroup overlap (P_{n-1} V_{n-1} under the softmax of S_n),
  // or, where O, S, P and the modifiers' state do not fit the consumer's
  // registers together, each step's P V waited for before S_n is issued
  // (fwd_sm90.cuh's step_seq): the consumers still overlap one another.
  static constexpr bool kOverlap = Overlap_;
  // O leaves through shared memory: each warp stages its 16 rows (16-byte
  // chunks swizzled by row), then stores whole rows by 16-byte stores, not
  // 4-byte stores straight from the accumulator (fwd_sm90.cuh's epilogue).
  static constexpr bool kStageO = StageO_;
  // Causal calls of at most this many keys run the sm_80 kernel instead (the
  // host's choice): over few key blocks the Hopper CTA's fixed cost (Q and
  // the first K/V behind TMA, the first S without overlap) loses to it.
  static constexpr int kSM80CausalMaxNk = SM80CausalMaxNk_;
  static constexpr int kSplits = 1;
  static constexpr bool kQRegs = false;
  static constexpr bool kPersistent = true;  // grid (min(tiles, SMs), 1, 1), not one CTA per tile
  static constexpr int kConsumers = kBr / 64;           // consumer warpgroups of 64 query rows
  static constexpr int kWarps = 4 * (kConsumers + 1);   // and the producer warpgroup
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kConsumerThreads = 128 * kConsumers;  // an "empty" barrier's arrivals
  static constexpr int kProducerRegs = 24;
  static constexpr int kLaunchRegs = sm90_launch_regs(kThreads);
  static constexpr int kConsumerRegs = ((kConsumers + 1) * kLaunchRegs - kProducerRegs) / kConsumers / 8 * 8;
  static constexpr int kBox = 64;                       // TMA box columns: one 128-byte swizzle row
  static constexpr int kQTile = 64 * kD * 2;            // one consumer's Q rows (bytes)
  static constexpr int kKVTile = kBc * kD * 2;          // K_n or V_n (bytes)
  // Q[consumers] | K[stages] | V[stages] | mbarriers: Q full; per stage K, V full
  // and empty; Q empty | a float per consumer thread (fwd_sm90.cuh's pin of the
  // softmax) | kStageO: O's rows, D 16-bit values each, per consumer.
  static constexpr int kBarOff = kConsumers * kQTile + 2 * kStages * kKVTile;
  static constexpr int kBars = 2 + 4 * kStages;
  static constexpr int kPinOff = kBarOff + 8 * kBars;
  static constexpr int kStageOOff = kPinOff + 4 * kConsumerThreads;
  static constexpr int kSmemBytes = kStageOOff + (kStageO ? kConsumers * kQTile : 0);
  // The ALiBi kernels without the softcap (fwd_sm90.cuh's kSide) add, in
  // the same swizzled layout, the A operand of S's ALiBi k16 step (one 64-row
  // box per consumer) and its B (one Bc-row box), 1024-aligned after the rest.
  static constexpr int kBiasOff = (kSmemBytes + 1023) / 1024 * 1024;
  static constexpr int kBiasA = 64 * 128, kBiasB = kBc * 128;
  static constexpr int kBiasSmemBytes = kBiasOff + kConsumers * kBiasA + kBiasB;
  static_assert(kBr % 64 == 0 && kConsumers >= 1, "Br is whole warpgroups of 64 rows");
  static_assert(kD % kBox == 0 && kBc % 16 == 0 && kBc <= 256, "D in 64-column boxes; Bc a wgmma N");
  static_assert(kConsumerRegs <= 240 && kConsumerRegs >= kD / 2 + kBc / 2 + kBc / 4 + 24,
                "O, S and P of a consumer's rows must fit its registers");
  static_assert(kBiasSmemBytes <= 227 * 1024, "H100/H200: at most 227 KiB per CTA");
};

// FA2_SM90A_TILES(X): THE list of shipped sm_90a forward kernels, one
// X(d, Br, Bc, stages, sm80_causal_max_nk, stage_o, mod_br, mod_bc, mod_stages, mod_overlap)
// per head dim: fa2_fwd_sm90a_d{D}[_bf16][_causal] on the tile (Br, Bc), O through
// shared memory or not (Tile90::kStageO), and the
// modified forward (a window, softcap, ALiBi: fa2_fwd_sm90a_d{D}[_bf16]_mod[_cap][_alibi],
// no causal twin) on (mod_br, mod_bc), with or without the intra-warpgroup
// overlap (Tile90::kOverlap); bf16 on the fp16 tiles (552 / 683 TFLOP/s at N 8192,
// D64 / D128 non-causal, against fp16's 544 / 657, H100). Packed sequences
// without modifiers run the plain pair's varlen twins (fa2_fwd_sm90a_*_varlen,
// the same tile); causal calls of at most sm80_causal_max_nk keys run the sm_80
// path: none, since
// the persistent D64 kernel, each consumer stopping at its own rows' last key
// block, beats the sm_80 one at causal N 512 / 1024 (204 / 258 TFLOP/s against
// 173 / 217, H200).
// D64: Br 192 (three consumers of 160); Br 128 (two of 240) ran 8-17% slower
// non-causal, 2-6% causal (H200). Its modified kernels keep the three consumers of 160
// registers and Bc 128 without the overlap: overlapped, the window bounds, the
// ALiBi distances and the softcap spilled 240-344 B at Bc 128 and 4-36 B at
// Bc 96. Against Bc 80 overlapped (N 8192, H200): softcap 1.09x, ALiBi 1.15x,
// both 1.06x, a window past every key 1.13x as fast; 4 stages over 2: a
// window past every key 1.03x, the rest equal.
#define FA2_SM90A_TILES(X)                                                                                  \
  X(64, 192, 128, 2, 0, false, 192, 128, 4, false) /* 3 consumers x 160 regs: O 32 + S 64 + P 32; 88 KiB smem; \
                                                      mod: 4 stages of 16 KiB K and V, 154 KiB smem;       \
                                                      1.01-1.10x cuDNN, causal or not (N >= 2048, H200);   \
                                                      O staged: within the run's spread */                 \
  X(128, 128, 128, 2, 0, true, 128, 128, 2, true) /* 2 consumers x 240 regs: O 64 + S 64 + P 32; 193 KiB   \
                                                     smem with O's 32 KiB; 0.94-1.01x cuDNN, causal        \
                                                     1.04-1.10x (N >= 2048, H200); O staged: 1.05-1.08x at \
                                                     N 512-1024, causal 1.06-1.15x (H100, the kernel) */

// Sm90Traits<D>::type ships, and Sm90Traits<D>::mod for the modified forward.
template <int D> struct Sm90Traits;
#define FA2_SM90A_TRAITS(D, BR, BC, S, NK, SO, MBR, MBC, MS, MOV) \
  template <> struct Sm90Traits<D> {                              \
    using type = Tile90<D, BR, BC, S, NK, true, SO>;              \
    using mod = Tile90<D, MBR, MBC, MS, 0, MOV>;                  \
  };
FA2_SM90A_TILES(FA2_SM90A_TRAITS)
#undef FA2_SM90A_TRAITS

// FA2_SM90A_SHORT_TILES(X): Hopper forward tiles for short calls, one
// X(d, Br, Bc, stages, stage_o, max_nq) per head dim that has one: dense plain
// calls (fp16 and bf16, causal or not) of at most max_nq query rows run
// fa2_fwd_sm90a_d{D}[_bf16][_causal]_short on (Br, Bc), O through shared
// memory or not (Tile90::kStageO), instead of the FA2_SM90A_TILES row; packed
// sequences and the modifiers keep that row.
// D64: Br 256 (four consumers of 112 registers) pads no query rows at N 512
// and 1024, where Br 192 pads 11-12% (576 / 1152 rows). The kernel alone at
// N 512 / 1024 (H100): 4 stages over 2 1.05x / 1.03x, causal 1.17x / 1.10x; O
// through shared memory a further 1.05x / 1.02x, causal 1.04x / 1.02x. At
// N 2048 Br 192 is faster again (0.95x), hence max_nq 1024.
#define FA2_SM90A_SHORT_TILES(X)                                                                        \
  X(64, 256, 64, 4, true, 1024) /* 4 consumers x 112 regs: O 32 + S 32 + P 16; 130.1 KiB smem;         \
                                   0.99x / 0.99x cuDNN at N 512 / 1024, causal 0.95x / 1.01x, against \
                                   Br 192's 0.91x / 0.95x, 0.85x / 0.88x (H100, fp16) */

template <int D> struct Sm90ShortTraits;
#define FA2_SM90A_SHORT_TRAITS(D, BR, BC, S, SO, MAXNQ) \
  template <> struct Sm90ShortTraits<D> {                \
    using type = Tile90<D, BR, BC, S, 0, true, SO>;      \
    static constexpr int kMaxNq = MAXNQ;                 \
  };
FA2_SM90A_SHORT_TILES(FA2_SM90A_SHORT_TRAITS)
#undef FA2_SM90A_SHORT_TRAITS

// Hopper (sm_90a) backward tiles (bwd_sm90.cuh; fa2_sm90a.cubin): the
// single pass of dense fp16 and bf16 backwards on an H100/H200 unless
// ForcePath(80). One CTA = one key block of Bc rows of one (batch, kv head):
// a producer warpgroup (TMA: K and V once, Q_m, dO_m, LSE and Di per query
// block of Br rows into kStages stages) and Bc/64 consumer warpgroups, each
// holding dK and dV of its 64 keys (D/2 + D/2 fp32 registers per thread)
// over every query block of the kv head's query heads. dQ_m goes to an fp32
// accumulator by TMA bulk reduce-adds, one per consumer and block.
template <int D_, int Br_, int Bc_, int Stages_, bool Ordered_>
struct Tile90Bwd {
  static constexpr int kArch = 90, kD = D_, kBr = Br_, kBc = Bc_, kStages = Stages_;
  static constexpr bool kOrdered = Ordered_;  // ships the ordered twin (Options.Deterministic)
  static constexpr int kConsumers = kBc / 64;
  static constexpr int kWarps = 4 * (kConsumers + 1);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLaunchRegs = sm90_launch_regs(kThreads);
  // D128's consumers need 240 (at 232 ptxas serialised the ordered twin's
  // wgmmas); D64's take 232 and leave the producer 40 (an ordered twin's dQ
  // writer, a producer thread, spilled its loop state at 24).
  static constexpr int kProducerRegs = kD == 128 ? 24 : 40, kConsumerRegs = kD == 128 ? 240 : 232;
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (kConsumers + 1) * kLaunchRegs,
                "setmaxnreg.inc waits forever for registers the CTA does not have");
  static constexpr int kBox = 64;                        // TMA box columns: one 128-byte swizzle row
  static constexpr int kKVBlock = kBc * kBox * 2;        // one 64-column box of K or V (bytes)
  static constexpr int kQBlock = kBr * kBox * 2;         // one 64-column box of Q_m or dO_m
  static constexpr int kKV = kBc * kD * 2, kQ = kBr * kD * 2;
  static constexpr int kDS = 64 * kBr * 2;               // one consumer's dS^T (64 keys x Br queries, 16-bit)
  // dQ_m = dS K over the block's Bc keys, split between the consumers: at
  // D128 by columns (consumer c: columns 64c.., 32 accumulator registers, not
  // 64), at D64 with Br 128 by rows (queries 64c..), at D64 with Br 64 by
  // keys (each its own 64 keys, all rows and columns: both add to the whole
  // block). By columns or rows the partials are disjoint: one add each, in
  // any order.
  static constexpr bool kDQByCols = kD == 128, kDQByRows = !kDQByCols && kBr == 128;
  static constexpr bool kDQDisjoint = kDQByCols || kDQByRows;
  // A query block of Br 80 is no wgmma M (64): dQ_m's partial is computed
  // transposed, dQ_m^T = K^T dS^T (M: the consumer's 64 columns, N: the Br
  // queries), with dS^T stored in 8x8 core matrices (wgmma's interleaved
  // layout, read N-major), and bwd_dqconv transposes it back.
  static constexpr bool kDQSwap = kBr % 64 != 0;
  // dS^T from P^T's packed 16-bit pairs, not its fp32 values: with the
  // fp32 ones live through dP^T's subtraction every Br-80 kernel spilled 8-32 B.
  static constexpr bool kDSFromP = kDQSwap;
  // dV's GEMM issued as soon as P^T is packed, so that dS^T is computed and
  // stored for dQ under it (bwd_sm90.cuh): at D128, with dK's issued early
  // too, the pass alone 1.10-1.14x (H100, N 1024-16384); dK's moved under
  // dQ_m's epilogue (kLateDK) on top, 1.02-1.05x, causal 1.01-1.04x, ordered
  // 1.01-1.05x. Not at D64's Br 128: S^T, dP^T and P^T live with dV's GEMM
  // spilled 76-156 B.
  static constexpr bool kEarlyDV = kD == 128;
  // P^T by ex2.approx.ftz (2 ulp; scores below 2^-126 flush to 0) at D128,
  // where the exponentials sit between the early GEMMs: 1.03-1.04x on them
  // (H100, the pass alone). At D64 plain 0.98-0.99x, its ordered causal
  // twin spilled 64 B.
  static constexpr bool kExp2Approx = kD == 128;
  static constexpr int kDQCols = kDQByCols ? 64 : kD, kDQRows = kDQByRows ? 64 : kBr;
  static constexpr int kDQ = kDQRows * kDQCols * 4;      // one consumer's dQ_m partial, fp32, fragment order
  static constexpr int kDQRegs = kDQRows * kDQCols / 128;  // its accumulator's floats per consumer thread
  static constexpr int kLD = 2 * kBr * 4;                // a stage's LSE log2(e) and Di, fp32
  // K | V | Q_m[stages] | dO_m[stages] | dS^T[consumers] | dQ_m[consumers] |
  // LSE, Di[stages] | mbarriers: K/V full; per stage Q full, empty; per
  // consumer dQ full, empty (the deterministic twin's).
  static constexpr int kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + kStages * kQ;
  static constexpr int kOffDS = kOffDO + kStages * kQ;
  // dS^T in two buffers at D128 (block g in g % 2): a consumer rewrites one
  // only after the other's dQ GEMM of two blocks before, so the consumers
  // meet once per block, not twice (with kEarlyDV level with one buffer:
  // 0.99-1.01x, H100). D64's ordered twin spilled 32-68 B with them.
  static constexpr int kDSBufs = kD == 128 ? 2 : 1;
  static constexpr int kOffDQ = kOffDS + kDSBufs * kConsumers * kDS;
  static constexpr int kOffLD = kOffDQ + kConsumers * kDQ;
  static constexpr int kOffBar = kOffLD + kStages * kLD;
  static constexpr int kSmemBytes = kOffBar + 8 * (1 + 2 * kStages + 2 * kConsumers);
  static_assert((kBr == 64 || (kBr == 128 && kD == 64) || (kBr == 80 && kD == 128)) && kBc == 128,
                "two consumers of 64 keys; query blocks of 64 (D 64, 128), 128 (D64, dQ by rows) or 80 (D128, dQ^T by columns)");
  static_assert(!kDQSwap || kDQByCols, "dQ_m^T's M is a consumer's 64 columns");
  static_assert(kD == 64 || kD == 128, "D in 64-column boxes");
  // dK, dV, S^T and dP^T; then dQ_m beside dK, dV and the packed P^T, dS^T.
  static_assert(kConsumerRegs >= kD + kBr && kConsumerRegs >= kD + kBr / 2 + kDQRegs,
                "dK, dV, S^T, dP^T and dQ_m fit a consumer's registers");
  static_assert(kSmemBytes <= 227 * 1024, "H100/H200: at most 227 KiB per CTA");
};

// FA2_SM90A_BWD_TILES(X): THE list of shipped sm_90a backward kernels, one
// X(d, Br, Bc, stages, ordered) per head dim: fa2_bwd_{pre,dqconv}_sm90a_d{D}[_bf16]
// and the single pass fa2_bwd_dkdvq_sm90a_d{D}[_bf16][_causal], with
// ordered its twin fa2_bwd_dkdvqdet_* (Options.Deterministic: dQ_m added in
// a fixed key-block order); without it a deterministic call runs the sm_80
// backward. Dense and unmodified only: varlen, a window, softcap or ALiBi,
// other head dims and ForcePath(80) run the sm_80 backward.
// D64 takes query blocks of 128, dQ split by rows: against Br 64 with dQ by
// keys, the pass alone 1.17-1.19x as fast, its ordered twin 1.45-1.67x
// (H100, N 1024-16384), which brings that twin above the sm_80 path's.
#define FA2_SM90A_BWD_TILES(X)                                                                             \
  X(64, 128, 128, 2, true) /* 2 consumers of 64 keys: dK 32 + dV 32 + S^T 64 + dP^T 64 + dQ by rows 32 regs; \
                              462-531 TFLOP/s, causal 370-488; ordered 431-496, causal 319-425 (the    \
                              pass alone on all-zero inputs, fp16, N 2048-16384, H100) */              \
  X(128, 80, 128, 2, true) /* dK 64 + dV 64 + S^T 40 + dP^T 40, then dQ_m^T by columns 40 regs: each  \
                              wait and barrier covers 80 queries, not 64 (FA3's D128 tile); the whole  \
                              backward 1.00-1.03x Br 64's, causal 0.97-1.04x, ordered 1.05-1.06x,      \
                              causal 1.00-1.04x (fp16, N 2048-16384, H100) */

// Sm90BwdTraits<D>::type ships.
template <int D> struct Sm90BwdTraits;
#define FA2_SM90A_BWD_TRAITS(D, BR, BC, S, ORD) \
  template <> struct Sm90BwdTraits<D> { using type = Tile90Bwd<D, BR, BC, S, ORD>; };
FA2_SM90A_BWD_TILES(FA2_SM90A_BWD_TRAITS)
#undef FA2_SM90A_BWD_TRAITS

// FA2_SM75_UNDER8(X): THE list of Turing kernels that run fewer than 8
// resident warps per SM (two per scheduler, the floor the sm_75 tiles aim at),
// X(symbol prefix, why); build.sh prints the reason on each such kernel's row
// of resources.md and fails on an sm_75 kernel under 8 warps without an entry,
// or an entry whose kernels reach 8.
#define FA2_SM75_UNDER8(X)                                                                                    \
  X("fa2_decode_sm75_d256",                                                                                   \
    "shared memory: a 32-key block of K and V (32 KiB at D256) and the 8 staged Q rows take 36 KiB, one CTA "  \
    "of 2 warps per 64 KiB SM; decode waits on HBM, not on issue, and a T4 SM needs ~8 KB in flight, which "  \
    "the next block's K (16 KiB, prefetched in registers) covers")                                            \
  X("fa2_bwd_dkdv_sm75_d128",                                                                                 \
    "shared memory: each warp owns 16 key rows whose K and V tiles (also the dK, dV staging) take 8 KiB at "  \
    "D128, so 8 warps would fill 64 KiB before any streamed query row; 8 warps need warps sharing rows "      \
    "(a 2-D warp grid, as bwd_kv.cuh on sm_80)")                                                              \
  X("fa2_bwd_dq_sm75_d128",                                                                                   \
    "shared memory: 64 KiB per CTA (Q, dO and K, V, as the forward D128); its 188-190 registers would allow 8 " \
    "warps")                                                                                                  \
  X("fa2_bwd_dkdv_sm75_d256",                                                                                 \
    "shared memory: 32 key rows of K and V (32 KiB at D256), 16 streamed query rows of Q and dO (16 KiB) and " \
    "the shared P^T, dS^T fragments (2 KiB): one CTA of 4 warps per 64 KiB SM; 8 warps would need 64 key "   \
    "rows (64 KiB of K and V alone) or four column groups (a quarter of the accumulators' columns each)")     \
  X("fa2_bwd_dq_sm75_d256",                                                                                   \
    "shared memory: 32 query rows of Q and dO (32 KiB), 16 streamed keys of K and V (16 KiB) and the shared " \
    "dS fragments (1 KiB): one CTA of 4 warps per 64 KiB SM; 8 warps would need 64 query rows (64 KiB of "    \
    "Q and dO alone) or four column groups")
