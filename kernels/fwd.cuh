// fwd.cuh: the FA2 forward kernel body, shared by the Turing and sm_80+ paths.
//
// One CTA = one block of Br query rows of one (batch, head); it walks the key
// blocks j = 0..Tc-1 (Bc rows each), and per block:
//   S = Q K_j^T            tensor cores, fp32 accumulators in registers
//   mask                   only on the ragged/diagonal blocks (mask.cuh)
//   m, l, P = online softmax(S)      fp32, in registers (softmax.cuh)
//   O = diag(corr) O + P V_j         P converted to fp16 in registers: the S
//                                    accumulator layout is the A-fragment layout
// and finally O /= l, L = m*scale + ln l.
//
// kMod (the fa2_fwd_*_mod[_cap][_alibi] kernels): a sliding window, softcap
// and ALiBi from FwdParams (mask.cuh's ScoreMods); kMod's bits say which score
// modifiers are compiled in (the host picks the kernel: one kernel holding all
// four bodies behind a per-CTA branch spilled 8-44 B at 255 registers). The
// CTA visits only the key blocks of its rows' window (skipping blocks on both
// edges, as causal does on one), and only blocks not wholly inside the window
// are masked per element; scores go to the softmax modified, in ScoreMods'
// units (ALiBi on blocks wholly on one side of the diagonal as a column bias,
// its row term carried in the softmax's m: ScoreMods::apply_side). Where the
// registers allow (kPeel below: D <= 64 on sm_80+, every D on Turing) the runs
// of clean blocks go in a loop of their own (mask.cuh's walk_blocks). kCausal
// is false for them: causal is window right 0, a parameter.
// With kMod 0 the code is the plain kernel's, instruction for instruction.
//
// kVarlen (the fa2_fwd_*_varlen kernels): blockIdx.y's batch is a sequence of
// packed tensors (varlen.cuh); its rows, keys and LSE entries start at its
// cumulative lengths, and the CTAs past its last row block (the grid covers
// the longest sequence) exit at once. Offsets only, folded the same way. The
// kMod kernels do the same at run time when the parameters carry the
// cumulative lengths (varlen.cuh's varlen_call), every tile.
//
// E is the element type of Q, K, V, O and P: __half, or __nv_bfloat16 on the
// sm_80 path (bf16 mma). Only the mma and the fp32 -> 16-bit packing (P, O)
// depend on it; copies and ldmatrix move the same 16-bit bits, through
// __half-typed pointers.
#pragma once
#include <cuda_fp16.h>
#include <type_traits>
#include "params.cuh"
#include "traits.cuh"
#include "mma.cuh"
#include "mask.cuh"
#include "softmax.cuh"
#include "tile_io.cuh"
#include "gemm.cuh"
#include "entry.cuh"
#include "varlen.cuh"
#include "n8.cuh"

namespace fa2 {

// The m16 form: each warp owns 16*MTiles query rows as the mma's m16 rows.
template <class T, bool kCausal, class E, int kMod, bool kVarlen>
__device__ __forceinline__ void fwd_m16(const FwdParams& p) {
  static_assert(!(kCausal && kMod), "the modified kernel takes causal as window right 0");
  static_assert(!(kMod && kVarlen), "the modified kernels take packed sequences at run time (varlen_call)");
  static_assert(std::is_same<E, __half>::value || T::kArch == 80, "bf16 runs on the sm_80 path only");
  constexpr int A = T::kArch, D = T::kD, Br = T::kBr, Bc = T::kBc, NT = T::kThreads, MT = T::kMTiles;
  constexpr int KD = D / 16;  // k16 steps of S = Q K^T
  constexpr int Bs = T::kBs;  // keys per softmax step (Bc / Splits)
  constexpr int NS = Bs / 8;  // n8 tiles of S
  constexpr int KB = Bs / 16; // k16 steps of O += P V
  constexpr int NO = D / 8;   // n8 tiles of O
  constexpr int C = D / 8;    // 16-byte chunks per row

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq;
  const int hk = h / (p.hq / p.hkv);  // GQA: Hq/Hkv query heads share a K/V head
  // Causal: the last row blocks see the most keys; launching them first shortens
  // the tail where a few long CTAs run alone (so under a window bounded on the right).
  const int m0 = (kCausal || kMod ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * Br;
  const int wrow = warp * 16 * MT;    // the warp's first row in the CTA
  const auto sv = seq_view<kVarlen, kMod != 0>(p, b);
  if (sv.vl && m0 >= sv.nq()) return;  // past this sequence's rows

  const __half* gQ = static_cast<const __half*>(p.q) + (sv.vl ? sv.sq.q0 * p.q_row_stride : b * p.q_batch_stride) + m0 * p.q_row_stride + h * p.q_head_stride;
  const __half* gK = static_cast<const __half*>(p.k) + (sv.vl ? sv.sq.k0 * p.k_row_stride : b * p.k_batch_stride) + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + (sv.vl ? sv.sq.k0 * p.v_row_stride : b * p.v_batch_stride) + hk * p.v_head_stride;
  __half* gO = static_cast<__half*>(p.o) + (sv.vl ? sv.sq.q0 * p.o_row_stride : b * p.o_batch_stride) + m0 * p.o_row_stride + h * p.o_head_stride;
  float* gL = p.lse + (sv.vl ? h * static_cast<int64_t>(p.nq) + sv.sq.q0 : (static_cast<int64_t>(b) * p.hq + h) * p.nq) + m0;  // varlen: (Hq, total)
  const int rows_q = min(Br, sv.nq() - m0);

  // kMod's additions are written `kMod ? added : plain` (folded by the
  // front end), so that the plain kernels compile to the same instructions.
  const WindowBlocks wb = kMod ? window_blocks<Br, Bc>(m0, sv.nq(), sv.nk(), p.window_left, p.window_right) : WindowBlocks{};
  const KeyBlocks kb = kMod ? KeyBlocks{wb.n_end, wb.n_mask} : key_blocks<Br, Bc, kCausal>(m0, sv.nq(), sv.nk());
  const int n_begin = kMod ? wb.n_begin : 0;  // the first block visited (a constant 0 without kMod)
  if (kMod ? kb.n_end <= n_begin : kb.n_end == 0) {  // no row here sees a key
    for (int idx = tid; idx < rows_q * C; idx += NT)
      *reinterpret_cast<uint4*>(gO + (idx / C) * p.o_row_stride + (idx % C) * 8) = make_uint4(0, 0, 0, 0);
    for (int r = tid; r < rows_q; r += NT) gL[r] = -INFINITY;
    return;
  }

  // Shared memory: Q | K[Stages] | V[Stages], or (kQAliasKV) K | V with Q and
  // the final O tile staged over them.
  __half* sQ = smem;
  __half* sK = T::kQAliasKV ? smem : smem + Br * D;
  __half* sV = sK + T::kStages * Bc * D;
  const LdAddr<D, kRowsFirst> la(lane);   // Q, V
  const LdAddr<D, kChunksFirst> lk(lane);  // K
  const uint32_t aQ = smem_u32(sQ), aK = smem_u32(sK), aV = smem_u32(sV);

  float o[MT][NO][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][n][e] = 0.f;
  OnlineSoftmax<MT> sm;
  sm.init();
  uint32_t qf[T::kQRegs ? MT : 1][T::kQRegs ? KD : 1][4];

  // Packed sequences in a kMod kernel on the sm_80 path: inside the loop the
  // sequence's lengths are read from shared memory where they are used
  // (kLenSmem; kept in registers, the D64 kernels spilled 4-16 B on sm_86 and
  // sm_90), the dense call's are the parameters'. Where O takes more than 64
  // registers per thread (D96-256, kPtrSmem) the K, V, O and L row pointers
  // wait there too, for dense calls as well: held in registers across the
  // loop, a packed sequence's spilled 4-28 B at 255 (nvcc 11.8). (At D64 that
  // form cost the dense softcap + ALiBi kernel 11%, H200 sm_80 path.) Not on
  // Turing, whose D128 tile takes all 64 KiB (and whose registers have room).
  constexpr bool kLenSmem = kMod && A == 80;
  constexpr bool kPtrSmem = kLenSmem && MT * NO * 4 > 64;
  __shared__ uint64_t s_ptr[4];  // K, V, O, L
  __shared__ int s_len[2];       // Nq, Nk
  const bool len_smem = kPtrSmem || (kLenSmem && sv.vl);
  if (len_smem) {
    if (tid == 0) {
      if (kPtrSmem) {
        s_ptr[0] = reinterpret_cast<uint64_t>(gK), s_ptr[1] = reinterpret_cast<uint64_t>(gV);
        s_ptr[2] = reinterpret_cast<uint64_t>(gO), s_ptr[3] = reinterpret_cast<uint64_t>(gL);
      }
      s_len[0] = sv.nq(), s_len[1] = sv.nk();
    }
    __syncthreads();
  }
  auto ptr = [&](int i) { return static_cast<volatile uint64_t*>(s_ptr)[i]; };
  auto loop_nq = [&] { return len_smem ? static_cast<volatile int*>(s_len)[0] : sv.nq(); };
  auto loop_nk = [&] { return len_smem ? static_cast<volatile int*>(s_len)[1] : sv.nk(); };
  auto loop_rows_q = [&] { return kPtrSmem ? min(Br, loop_nq() - m0) : rows_q; };
  // K_n's and V_n's first rows.
  auto k_blk = [&](int n) { return (kPtrSmem ? reinterpret_cast<const __half*>(ptr(0)) : gK) + n * Bc * p.k_row_stride; };
  auto v_blk = [&](int n) { return (kPtrSmem ? reinterpret_cast<const __half*>(ptr(1)) : gV) + n * Bc * p.v_row_stride; };
  auto kv_rows = [&](int n) { return loop_nk() - n * Bc; };
  const ScoreMods mods0 = kMod ? ScoreMods::of(p, h, p.nq, p.nk) : ScoreMods{};  // packed: apply_mods sets the lengths
  constexpr bool kCap = kMod & kModCap, kALiBi = kMod & kModALiBi;
  // ALiBi's column-bias form (apply_side) without the softcap: with both, its
  // third score body spilled at 255 registers (sm_90, D96; nvcc 11.8).
  constexpr bool kSide = kALiBi && !kCap;
  int side = 0;  // ALiBi: the form sm.m is in (ScoreMods::apply_side)
  auto to_side = [&](int to) {
    if (to != side) mods0.shift_side<MT>(sm.m, side, to, wrow, lane);
    side = to;
  };
  // kMod only; tag: walk_blocks' (1 masked, 0 clean, -1: decided here).
  auto apply_mods = [&](float (&s)[MT][NS][4], int n, int col0, int tag) {
    const ScoreMods mods = sv.vl ? mods0.with_lengths(loop_nq(), loop_nk()) : mods0;
    if (tag > 0 || (tag < 0 && (n < wb.n_full || n >= kb.n_mask))) {
      if (kSide) to_side(0);
      mods.template apply<MT, NS, true, kCap, kALiBi>(s, m0 + wrow, col0, lane);
    } else if (kSide) {  // inside the window: a column bias unless the block crosses the diagonal
      to_side(mods.template alibi_side<Bs>(m0, m0 + loop_rows_q() - 1, col0));
      if (side != 0) mods.template apply_side<MT, NS, kCap>(s, side, m0, col0, lane);
      else mods.template apply<MT, NS, false, kCap, true>(s, m0 + wrow, col0, lane);
    } else if (kCap || kALiBi) {  // inside the window: the plain kernel's code with them
      mods.template apply<MT, NS, false, kCap, kALiBi>(s, m0 + wrow, col0, lane);
    }
  };
  // Peeled (walk_blocks) where the two loop bodies fit the registers that the
  // O accumulators leave: at 128 registers of O per thread (D128, 32 rows per
  // warp) the peeled kernels spilled 24-88 B at 255 (sm_90, nvcc 11.8). ALiBi
  // alone (kSide) is not: its two clean forms gained nothing from a loop of
  // their own (D64 1.10-1.13x the plain kernel either way, same run).
  constexpr bool kPeel = kMod && MT * NO * 4 <= 64 && !kSide;

  if constexpr (A == 80) {
    cp_tile<Br, D, NT>(sQ, gQ, p.q_row_stride, rows_q, tid);
    cp_tile<Bc, D, NT>(sK, kMod ? k_blk(n_begin) : gK, p.k_row_stride, kv_rows(n_begin), tid);
    if constexpr (T::kStages == 2)
      cp_tile<Bc, D, NT>(sV, kMod ? v_blk(n_begin) : gV, p.v_row_stride, kv_rows(n_begin), tid);
    cp_async_commit();
    if constexpr (T::kQRegs) {
      cp_async_wait<0>();
      __syncthreads();
      load_frags<D, MT>(qf, la, aQ, wrow);
    }
    walk_blocks<kPeel>(n_begin, kb.n_end, wb.n_full, kb.n_mask, [&](int n, auto tag) {
      const int buf = T::kStages == 2 ? ((kMod ? n - n_begin : n) & 1) : 0;
      const uint32_t kbase = aK + buf * Bc * D * 2, vbase = aV + buf * Bc * D * 2;
      cp_async_wait<0>();
      __syncthreads();  // K_n (and V_n) landed; every warp is done with step n-1's buffers
      if constexpr (T::kStages == 2) {
        if (n + 1 < kb.n_end) {  // the next block's copy overlaps this whole step
          cp_tile<Bc, D, NT>(sK + (buf ^ 1) * Bc * D, k_blk(n + 1), p.k_row_stride, kv_rows(n + 1), tid);
          cp_tile<Bc, D, NT>(sV + (buf ^ 1) * Bc * D, v_blk(n + 1), p.v_row_stride, kv_rows(n + 1), tid);
        }
        cp_async_commit();
      } else {
        cp_tile<Bc, D, NT>(sV, v_blk(n), p.v_row_stride, kv_rows(n), tid);
        cp_async_commit();
      }
#pragma unroll
      for (int sp = 0; sp < T::kSplits; ++sp) {
        float s[MT][NS][4];
        gemm_abt<A, D, MT, Bs, T::kQRegs, E>(s, qf, la, aQ, wrow, lk, kbase + sp * Bs * D * 2, 0);  // S = Q K^T
        if constexpr (kMod) apply_mods(s, n, n * Bc + sp * Bs, decltype(tag)::value);
        else if (n >= kb.n_mask) apply_mask<MT, NS, kCausal>(s, m0 + wrow, n * Bc + sp * Bs, lane, sv.nq(), sv.nk());
        if constexpr (T::kStages == 1) {
          cp_async_wait<0>();
          __syncthreads();  // V_n landed; every warp is done reading K_n
          if (n + 1 < kb.n_end)
            cp_tile<Bc, D, NT>(sK, k_blk(n + 1), p.k_row_stride, kv_rows(n + 1), tid);
          cp_async_commit();
        }
        sm.step(s, o, kMod ? mods0.unit_log2 : p.scale_log2);  // kMod: scores in ScoreMods units
        uint32_t pf[MT][KB][4];
        pack_a<MT, Bs, E>(s, pf);  // P in E A fragments: frees the fp32 scores before PV
        gemm_pb<A, D, MT, Bs, E>(o, pf, la, vbase + sp * Bs * D * 2, 0);  // O += P V
      }
    });
  } else {
    {  // Q through the K/V area into registers.
      RegTile<Br, D, NT> rq;
      rq.load(gQ, p.q_row_stride, rows_q, tid);
      rq.store(sQ, tid);
      __syncthreads();
      if constexpr (T::kQRegs) load_frags<D, MT>(qf, la, aQ, wrow);
      if constexpr (T::kQAliasKV) __syncthreads();  // K/V stores below overwrite Q
    }
    RegTile<Bc, D, NT> rk, rv;
    rk.load(kMod ? gK + n_begin * Bc * p.k_row_stride : gK, p.k_row_stride, kv_rows(n_begin), tid);
    rv.load(kMod ? gV + n_begin * Bc * p.v_row_stride : gV, p.v_row_stride, kv_rows(n_begin), tid);
    rk.store(sK, tid);
    rv.store(sV, tid);
    __syncthreads();
    walk_blocks<kPeel>(n_begin, kb.n_end, wb.n_full, kb.n_mask, [&](int n, auto tag) {
      const bool more = n + 1 < kb.n_end;
      if (more) {  // global loads in flight during the whole step
        rk.load(gK + (n + 1) * Bc * p.k_row_stride, p.k_row_stride, kv_rows(n + 1), tid);
        rv.load(gV + (n + 1) * Bc * p.v_row_stride, p.v_row_stride, kv_rows(n + 1), tid);
      }
#pragma unroll
      for (int sp = 0; sp < T::kSplits; ++sp) {
        float s[MT][NS][4];
        gemm_abt<A, D, MT, Bs, T::kQRegs, E>(s, qf, la, aQ, wrow, lk, aK + sp * Bs * D * 2, 0);
        if constexpr (kMod) apply_mods(s, n, n * Bc + sp * Bs, decltype(tag)::value);
        else if (n >= kb.n_mask) apply_mask<MT, NS, kCausal>(s, m0 + wrow, n * Bc + sp * Bs, lane, sv.nq(), sv.nk());
        sm.step(s, o, kMod ? mods0.unit_log2 : p.scale_log2);  // kMod: scores in ScoreMods units
        uint32_t pf[MT][KB][4];
        pack_a<MT, Bs, E>(s, pf);  // P in E A fragments: frees the fp32 scores before PV
        gemm_pb<A, D, MT, Bs, E>(o, pf, la, aV + sp * Bs * D * 2, 0);
      }
      if (more) {
        __syncthreads();  // every warp is done with K_n, V_n
        rk.store(sK, tid);
        rv.store(sV, tid);
        __syncthreads();
      }
    });
  }

  // Epilogue: normalise, stage O (as E) through shared memory for 16-byte row
  // stores, write L for the rows that exist.
  float lse[MT][2];
  if (kSide) to_side(0);  // L of the |distance| form
  sm.finish(o, kMod ? mods0.unit : p.scale, lse);
  __syncthreads();  // all warps are done with the K/V (Turing) or Q area
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = wrow + 16 * i + g + 8 * hh;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<uint32_t*>(sQ + Swizzle<D>::offset(row, n) + 2 * t) =
            pack2<E>(o[i][n][2 * hh], o[i][n][2 * hh + 1]);
      if (t == 0 && row < loop_rows_q()) (kPtrSmem ? reinterpret_cast<float*>(ptr(3)) : gL)[row] = lse[i][hh];
    }
  __syncthreads();
  store_rows<Br, D, NT>(sQ, kPtrSmem ? reinterpret_cast<__half*>(ptr(2)) : gO, p.o_row_stride, loop_rows_q(), tid);
}

// The n8 form (Tile kN8: Br = 8 x Warps; the Turing D256 row, whose m16 O
// does not fit beside the prefetch): each warp owns 8 query rows as the mma's
// n8 and takes every key of each block (n8.cuh's WarpN8: S^T = K Q^T, O^T +=
// V^T P^T). One body for every variant: causal is window right 0 and the
// plain kernel a window open on both sides (window_blocks visits and masks
// the same blocks as key_blocks then), softcap and ALiBi are WarpN8::step's
// flags; the template arguments fold them to constants, so each symbol still
// runs its own straight-line code. Packed sequences as fwd_m16's.
template <class T, bool kCausal, class E, int kMod, bool kVarlen>
__device__ __forceinline__ void fwd_n8(const FwdParams& p) {
  static_assert(!(kCausal && kMod), "the modified kernel takes causal as window right 0");
  static_assert(!(kMod && kVarlen), "the modified kernels take packed sequences at run time (varlen_call)");
  static_assert(T::kArch == 75 && std::is_same<E, __half>::value, "the n8 forward is the Turing path's");
  constexpr int A = T::kArch, D = T::kD, Br = T::kBr, Bc = T::kBc, NT = T::kThreads, C = D / 8;
  constexpr bool kCap = kMod & kModCap, kALiBi = kMod & kModALiBi;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq;
  const int hk = h / (p.hq / p.hkv);
  const int m0 = (kCausal || kMod ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * Br;  // as fwd_m16
  const bool vl = varlen_call<kVarlen, kMod != 0>(p);
  const Seq sq = vl ? seq_of(p, b) : Seq{};
  const int nq = vl ? sq.nq : p.nq, nk = vl ? sq.nk : p.nk;
  if (vl && m0 >= nq) return;  // past this sequence's rows

  const __half* gQ = static_cast<const __half*>(p.q) + (vl ? sq.q0 * p.q_row_stride : b * p.q_batch_stride) + m0 * p.q_row_stride + h * p.q_head_stride;
  const __half* gK = static_cast<const __half*>(p.k) + (vl ? sq.k0 * p.k_row_stride : b * p.k_batch_stride) + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + (vl ? sq.k0 * p.v_row_stride : b * p.v_batch_stride) + hk * p.v_head_stride;
  __half* gO = static_cast<__half*>(p.o) + (vl ? sq.q0 * p.o_row_stride : b * p.o_batch_stride) + m0 * p.o_row_stride + h * p.o_head_stride;
  float* gL = p.lse + (vl ? h * static_cast<int64_t>(p.nq) + sq.q0 : (static_cast<int64_t>(b) * p.hq + h) * p.nq) + m0;
  const int rows_q = min(Br, nq - m0);

  const int left = kMod ? p.window_left : -1, right = kMod ? p.window_right : kCausal ? 0 : -1;
  const WindowBlocks wb = window_blocks<Br, Bc>(m0, nq, nk, left, right);
  if (wb.n_end <= wb.n_begin) {  // no row here sees a key
    for (int idx = tid; idx < rows_q * C; idx += NT)
      *reinterpret_cast<uint4*>(gO + (idx / C) * p.o_row_stride + (idx % C) * 8) = make_uint4(0, 0, 0, 0);
    for (int r = tid; r < rows_q; r += NT) gL[r] = -INFINITY;
    return;
  }
  // ScoreMods' units: the softmax runs in units of the cap where there is one.
  const float unit = kCap ? p.softcap : p.scale, unit_log2 = kCap ? p.softcap * kLog2e : p.scale_log2;
  const float cap_in = kCap ? p.scale / p.softcap : 0.f;
  const float slope = kALiBi ? p.alibi_slopes[h] / unit : 0.f;

  // Shared memory: Q (Br rows; warp w reads rows 8w..8w+7, later its O) | K | V.
  __half* sQ = smem;
  __half* sK = smem + Br * D;
  __half* sV = sK + Bc * D;
  const uint32_t aQw = smem_u32(sQ + warp * 8 * D), aK = smem_u32(sK), aV = smem_u32(sV);
  WarpN8<A, D, Bc, E, T::kQRegs> n8;
  n8.init(slope, slope);

  load_tile<A, Br, D, NT>(sQ, gQ, p.q_row_stride, rows_q, tid);  // rows past Nq are 0
  RegTile<Bc, D, NT> rk, rv;
  rk.load(gK + wb.n_begin * Bc * p.k_row_stride, p.k_row_stride, nk - wb.n_begin * Bc, tid);
  rv.load(gV + wb.n_begin * Bc * p.v_row_stride, p.v_row_stride, nk - wb.n_begin * Bc, tid);
  rk.store(sK, tid);
  rv.store(sV, tid);
  __syncthreads();
  if constexpr (T::kQRegs) n8.load_q(aQw, lane);
  for (int n = wb.n_begin; n < wb.n_end; ++n) {
    const bool more = n + 1 < wb.n_end;
    if (more) {  // global loads in flight during the whole step
      rk.load(gK + (n + 1) * Bc * p.k_row_stride, p.k_row_stride, nk - (n + 1) * Bc, tid);
      rv.load(gV + (n + 1) * Bc * p.v_row_stride, p.v_row_stride, nk - (n + 1) * Bc, tid);
    }
    n8.step(aQw, aK, aV, 0, n * Bc, n < wb.n_full || n >= wb.n_mask, lane, m0 + 8 * warp, 1, nk, nk - nq, left, right,
            kCap, kALiBi, cap_in, unit_log2);
    if (more) {
      __syncthreads();  // every warp is done with K_n, V_n
      rk.store(sK, tid);
      rv.store(sV, tid);
      __syncthreads();
    }
  }

  // Epilogue: O normalised into the warp's own Q rows (only it read them),
  // then 16-byte row stores; L for the rows that exist.
  n8.finish(unit);
  __syncwarp();
  n8.store_o(sQ + warp * 8 * D, lane);
  if ((lane >> 2) == 0) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = 8 * warp + 2 * lane + e;
      if (row < rows_q) gL[row] = n8.lse[e];
    }
  }
  __syncthreads();
  store_rows<Br, D, NT>(sQ, gO, p.o_row_stride, rows_q, tid);
}

// The forward of tile T: the n8 form where its warps own 8 rows, else the m16 one.
template <class T, bool kCausal, class E = __half, int kMod = 0, bool kVarlen = false>
__device__ __forceinline__ void fwd_kernel(const FwdParams& p) {
  if constexpr (T::kN8) fwd_n8<T, kCausal, E, kMod, kVarlen>(p);
  else fwd_m16<T, kCausal, E, kMod, kVarlen>(p);
}

// Template entry for the dev harness (tuning candidates); the shipped kernels are
// the extern "C" ones in fwd.cu.
template <class T, bool kCausal>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) fwd_tpl(const FwdParams p) {
  arch_entry<T::kArch, FwdParams, fwd_kernel<T, kCausal>>(p);
}

}  // namespace fa2
