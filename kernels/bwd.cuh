// bwd.cuh: the FA2 backward pass, shared by the Turing and sm_80+ paths.
//
// Three kernels, launched in this order on one stream:
//   pre    Di = rowsum(dO_i * O_i), fp32 (B, Hq, Nq): the dP - Di term of dS.
//   dK/dV  one CTA = one block of Bc key rows of one kv head. It walks every Q
//          block of every query head of its GQA group and, per block,
//            S^T  = K Q_i^T,  P^T = exp2(S^T*scale*log2e - L_i*log2e)  (P from the stored LSE)
//            dP^T = V dO_i^T, dS^T = P^T * (dP^T - Di)
//            dV  += P^T dO_i,  dK += dS^T Q_i                (dK *= scale at the end)
//   dQ     one CTA = one block of Br query rows of one head; per K/V block
//            S = Q K_j^T, P, dP = dO V_j^T, dS = P * (dP - Di), dQ += dS K_j   (*= scale)
// The dK/dV kernel computes the products transposed (rows = its keys), so every
// product is one of the forward's two shapes: A B^T over the head dim (S = Q K^T)
// or P B over a block of rows (O += P V), with the same fragments and ldmatrix
// orders. FA2 instead adds dQ with atomics from the dK/dV kernel; two kernels
// that each own their outputs cost S and dP twice (7 products instead of 5)
// but are deterministic and need no fp32 dQ buffer.
//
// ColGroups (traits.cuh's BwdTile; Turing D256): the warps sharing 16 owned rows
// each accumulate their share of the head dim's columns and compute their share
// of a chunk's S and dP columns; the P and dS fragments are put together
// through shared memory (gemm.cuh's share_put/get) before the dV, dK or dQ
// product.
//
// Masking: causal is bottom-right aligned (mask.cuh); a row that sees no key
// has LSE -inf, loaded here as L = +inf so that its P, dS and dQ are exactly 0.
// Query rows past Nq are zero-filled with L = +inf (P = 0); keys past Nk are
// zero-filled and masked in the dQ kernel, never stored by the dK/dV kernel.
//
// kVarlen (the fa2_bwd_*_varlen kernels): blockIdx.y's batch is a sequence of
// packed tensors (varlen.cuh), each its own problem as in fwd.cuh: rows, keys,
// L and Di start at its cumulative lengths, the CTAs past its rows (pre, dQ) or
// keys (dK/dV) exit at once, and its lengths are read where the plain kernels
// read Nq and Nk. Offsets only: the plain kernels' code is unchanged. The
// kMod kernels do the same at run time when BwdParams carries the
// cumulative lengths (varlen.cuh's varlen_call; pre is then the varlen one).
//
// kMod (the fa2_bwd_{dkdv,dq}_*_mod kernels): the sliding window, softcap and
// ALiBi of the modified forward (mask.cuh's ScoreMods, read from BwdParams at
// run time; causal is the window's right = 0). P is recomputed from the LSE on
// the scores the forward's softmax saw (the same tanh.approx cap and ALiBi
// bias, the window as the mask), and dS gets the softcap's chain rule:
// d(c*tanh(x/c))/dx = 1 - t^2, t the capped score / c. The bias has no
// gradient. One kernel per tile and dtype with run-time flags, unlike the
// forward's one per combination: see FA2_BWD_TILES. The blocks walked are
// those of the window (window_blocks, and its transpose in dK/dV).
//
// E is the element type of Q, K, V, O, dO and the gradients: __half, or
// __nv_bfloat16 on the sm_80 path, as in fwd.cuh. Only the mma, the fp32 ->
// 16-bit packing of P, dS and the gradients, and pre's 16-bit -> fp32
// unpacking depend on it; copies and ldmatrix move the same 16-bit bits.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "params.cuh"
#include "traits.cuh"
#include "mma.cuh"
#include "mask.cuh"
#include "tile_io.cuh"
#include "gemm.cuh"
#include "entry.cuh"
#include "varlen.cuh"

namespace fa2 {

// L in the log2 domain for P = exp2(S*scale*log2e - L), and Di, of query row
// `row` of (b, h): rows past Nq or that see no key get L = +inf (P = 0), Di = 0.
__device__ __forceinline__ void row_stats(const BwdParams& p, int b, int h, int row, float& l, float& di) {
  l = INFINITY;
  di = 0.f;
  if (row < p.nq) {
    const int64_t r = (static_cast<int64_t>(b) * p.hq + h) * p.nq + row;
    const float lse = p.lse[r];
    if (lse != -INFINITY) l = lse * kLog2e;
    di = p.di[r];
  }
}

// row_stats of the L and Di row at index r (valid: the row exists), for
// callers that found r themselves (bwd_kv.cuh's kMod, dense or packed).
__device__ __forceinline__ void row_stats_at(const BwdParams& p, int64_t r, bool valid, float& l, float& di) {
  l = INFINITY;
  di = 0.f;
  if (valid) {
    const float lse = p.lse[r];
    if (lse != -INFINITY) l = lse * kLog2e;
    di = p.di[r];
  }
}

// row_stats of row `row` of query head h of varlen sequence sq: L and Di are
// (Hq, total_q), p.nq the packed total.
__device__ __forceinline__ void row_stats(const BwdParams& p, const Seq& sq, int h, int row, float& l, float& di) {
  l = INFINITY;
  di = 0.f;
  if (row < sq.nq) {
    const int64_t r = h * static_cast<int64_t>(p.nq) + sq.q0 + row;
    const float lse = p.lse[r];
    if (lse != -INFINITY) l = lse * kLog2e;
    di = p.di[r];
  }
}

// P and dS of one score: x the score before scaling, scale_log2 its scale
// (times log2 e), l and di the row's L (log2) and Di, dp its dP;
// P = exp2(x * scale_log2 - l), dS = P * (dP - Di) (in dp).
__device__ __forceinline__ void p_ds(float x, float scale_log2, float l, float di, float& p, float& dp) {
  p = exp2_approx(fmaf(x, scale_log2, -l));
  dp = p * (dp - di);
}

// P and dS of one score under the modifiers (kMod): x the raw q.k, dist the
// query's diagonal key minus the key (i+off-j), vis whether the window shows
// the key, l and di the row's L (log2) and Di, dp its dP.
__device__ __forceinline__ void mod_p_ds(const ScoreMods& m, bool cap, float x, float dist, bool vis, float l, float di, float& p,
                                         float& dp) {
  const float t = cap ? tanh_approx(x * m.cap_in) : x;
  p_ds(vis ? fmaf(-m.alibi, fabsf(dist), t) : -INFINITY, m.unit_log2, l, di, p, dp);
  if (cap) dp *= fmaf(-t, t, 1.f);  // the softcap's chain rule
}

// Whether the window [i+off-left, i+off+right] of query i (bounds < 0: open) shows key j < nk.
__device__ __forceinline__ bool window_shows(const ScoreMods& m, int i, int j) {
  const int d = i + m.off - j;
  return j < m.nk && (m.left < 0 || d <= m.left) && (m.right < 0 || -d <= m.right);
}

// ---- pre: Di = rowsum(dO * O) ----
// A group of L lanes (D/8 rounded up to a power of two) reads one row in
// 16-byte pieces and sums by xor-shuffles inside the group.
constexpr int kPreRows = 64, kPreThreads = 128;
// The single pass's dQ accumulator on packed sequences rounds each
// sequence's rows up to kAccumPad (bwd_kv.cuh's dq_accum_row): a multiple of
// every tile's Br, so pre can zero a sequence's blocks without knowing the tile.
constexpr int kAccumPad = 128;


template <int D, class E = __half, bool kVarlen = false>
__device__ __forceinline__ void bwd_pre_kernel(const BwdParams& p) {
  constexpr int C = D / 8;
  constexpr int L = C <= 4 ? 4 : C <= 8 ? 8 : C <= 16 ? 16 : 32;
  constexpr int RP = kPreThreads / L;  // rows per pass
  static_assert(kPreRows % RP == 0, "rows per CTA must be whole passes");
  const int tid = threadIdx.x, c = tid % L, r0 = tid / L;
  const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq;
  const int m0 = blockIdx.x * kPreRows;
  const Seq sq = kVarlen ? seq_of(p, b) : Seq{};
  auto nq = [&] { return kVarlen ? sq.nq : p.nq; };
  if (kVarlen && m0 >= nq()) return;  // past this sequence's rows
  const __half* gO = static_cast<const __half*>(p.o) + (kVarlen ? sq.q0 * p.o_row_stride : b * p.o_batch_stride) + h * p.o_head_stride;
  const __half* gdO = static_cast<const __half*>(p.dout) + (kVarlen ? sq.q0 * p.do_row_stride : b * p.do_batch_stride) + h * p.do_head_stride;
  float* gDi = p.di + (kVarlen ? h * static_cast<int64_t>(p.nq) + sq.q0 : (static_cast<int64_t>(b) * p.hq + h) * p.nq);
  // The single pass's dQ accumulator (bwd_kv.cuh; dq_accum_rows rows of D
  // floats per (b, h), padding after Nq included): this CTA's rows zeroed for
  // the atomics that follow, as a write stream beside the reads of O and dO
  // (FA2's pre kernel does the same), so the convert kernel only reads it.
  // The last CTA zeroes through the end: a query block of Br > kPreRows rows
  // keeps its storage in fragment order, where rows past Nq's last kPreRows
  // piece may hold live rows' columns (bwd_kv.cuh, dq_accum_index).
  if (!kVarlen && p.dq_accum != nullptr) {
    const int rows = (blockIdx.x + 1 == gridDim.x ? p.dq_accum_rows : min(p.dq_accum_rows, m0 + kPreRows)) - m0;
    float4* acc = reinterpret_cast<float4*>(p.dq_accum + (static_cast<int64_t>(blockIdx.y) * p.dq_accum_rows + m0) * D);
    for (int i = tid; i < rows * (D / 4); i += kPreThreads) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Packed sequences (before the modified single pass): sequence b's slab of
  // head h (bwd_kv.cuh's dq_accum_row), its rows up to Nq rounded to kAccumPad,
  // the sequence's last CTA zeroing through that end.
  if (kVarlen && p.dq_accum != nullptr) {
    const int pad = (nq() + kAccumPad - 1) / kAccumPad * kAccumPad;
    const int rows = (m0 + kPreRows >= nq() ? pad : min(pad, m0 + kPreRows)) - m0;
    float4* acc = reinterpret_cast<float4*>(p.dq_accum + (h * static_cast<int64_t>(p.dq_accum_rows) + sq.q0 + static_cast<int64_t>(b) * kAccumPad + m0) * D);
    for (int i = tid; i < rows * (D / 4); i += kPreThreads) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int k = 0; k < kPreRows / RP; ++k) {
    const int row = m0 + r0 + k * RP;
    float acc = 0.f;
    if (row < nq() && c < C) {
      const uint4 o = *reinterpret_cast<const uint4*>(gO + row * p.o_row_stride + c * 8);
      const uint4 d = *reinterpret_cast<const uint4*>(gdO + row * p.do_row_stride + c * 8);
      using E2 = typename Pair<E>::type;
      const E2* oh = reinterpret_cast<const E2*>(&o);
      const E2* dh = reinterpret_cast<const E2*>(&d);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 of = to_float2(oh[e]), df = to_float2(dh[e]);
        acc = fmaf(of.x, df.x, fmaf(of.y, df.y, acc));
      }
    }
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (c == 0 && row < nq()) gDi[row] = acc;
  }
}

// ---- dK, dV ----
template <class T, bool kCausal, class E = __half, bool kVarlen = false, bool kMod = false>
__device__ __forceinline__ void bwd_dkdv_kernel(const BwdParams& p) {
  static_assert(!kMod || (!kCausal && !kVarlen), "the modified backward takes causal as its window, packed sequences at run time");
  static_assert(std::is_same<E, __half>::value || T::kArch == 80, "bf16 runs on the sm_80 path only");
  constexpr int A = T::kArch, D = T::kD, Bc = T::kRows, Br = T::kCols, NT = T::kThreads, MT = T::kMTiles;
  constexpr int W = T::kChunk, DC = T::kColsPerWarp, NO = DC / 8;
  static_assert(Br <= NT, "one thread per streamed row loads L and Di");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int t = lane & 3;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv;
  const int groups = p.hq / p.hkv;
  const int n0 = blockIdx.x * Bc;
  // The warp's first key row in the CTA, first dK/dV column and first query
  // column of a chunk's S^T (ColGroups; with one group written so the compiler
  // sees column 0).
  constexpr int CG = T::kColGroups, WJ = W / 8 / CG;
  const int wrow = (CG == 1 ? warp : warp % T::kRowWarps) * 16 * MT;
  const int wcol = CG == 1 ? 0 : warp / T::kRowWarps * DC;
  const int wg = CG == 1 ? 0 : warp / T::kRowWarps, wq = wg * (W / CG);
  const auto sv = seq_view<kVarlen, kMod>(p, b);
  if (sv.vl && n0 >= sv.nk()) return;  // past this sequence's keys
  const int rows_k = min(Bc, sv.nk() - n0);

  __half* gdK = static_cast<__half*>(p.dk) + (sv.vl ? sv.sq.k0 * p.dk_row_stride : b * p.dk_batch_stride) + n0 * p.dk_row_stride + hk * p.dk_head_stride;
  __half* gdV = static_cast<__half*>(p.dv) + (sv.vl ? sv.sq.k0 * p.dv_row_stride : b * p.dv_batch_stride) + n0 * p.dv_row_stride + hk * p.dv_head_stride;

  // Steps: Q blocks [qr.begin, qr.end) of each query head of the group, head-major.
  const int tr = (sv.nq() + Br - 1) / Br;
  const BlockRange qr = key_block_queries<Br, Bc, kCausal, kMod>(n0, sv.nq(), sv.nk(), tr, p.window_left, p.window_right);
  const int i0 = qr.begin, per_head = qr.end - qr.begin;
  const int steps = groups * per_head;
  if (steps == 0) {
    store_zero_rows<Bc, D, NT>(gdK, p.dk_row_stride, rows_k, tid);
    store_zero_rows<Bc, D, NT>(gdV, p.dv_row_stride, rows_k, tid);
    return;
  }

  // Shared memory: K | V | (Q | dO)[Stages] | (L | Di)[Stages].
  __half* sK = smem;
  __half* sV = sK + Bc * D;
  __half* sQ = sV + Bc * D;
  float* sStat = reinterpret_cast<float*>(smem + T::kOwnElems + T::kStages * T::kStreamElems);
  // ColGroups > 1: the row group's P^T and dS^T fragments (share_put/get), its barrier.
  uint2* xP = reinterpret_cast<uint2*>(smem_raw + T::kShareOffset) + (warp % T::kRowWarps) * 2 * MT * (W / 8) * 32;
  uint2* xS = xP + MT * (W / 8) * 32;
  const GroupSync group{1 + warp % T::kRowWarps, 32 * CG};
  const LdAddr<D, kRowsFirst> la(lane);
  const LdAddr<D, kChunksFirst> lk(lane);
  const uint32_t aK = smem_u32(sK), aV = smem_u32(sV), aS = smem_u32(sQ);

  auto head_of = [&](int s) { return hk * groups + s / per_head; };
  auto row0_of = [&](int s) { return (i0 + s % per_head) * Br; };
  // Q_i and dO_i of step s into stream buffer buf.
  auto issue = [&](int s, int buf) {
    const int h = head_of(s), m0 = row0_of(s);
    const __half* gQ = static_cast<const __half*>(p.q) + (sv.vl ? sv.sq.q0 * p.q_row_stride : b * p.q_batch_stride) + m0 * p.q_row_stride + h * p.q_head_stride;
    const __half* gdO = static_cast<const __half*>(p.dout) + (sv.vl ? sv.sq.q0 * p.do_row_stride : b * p.do_batch_stride) + m0 * p.do_row_stride + h * p.do_head_stride;
    __half* dst = sQ + buf * 2 * Br * D;
    load_tile<A, Br, D, NT>(dst, gQ, p.q_row_stride, sv.nq() - m0, tid);
    load_tile<A, Br, D, NT>(dst + Br * D, gdO, p.do_row_stride, sv.nq() - m0, tid);
  };
  auto stats = [&](int s, float& l, float& di) {
    l = INFINITY;
    di = 0.f;
    if (tid < Br) {
      if (sv.vl) row_stats(p, sv.sq, head_of(s), row0_of(s) + tid, l, di);
      else row_stats(p, b, head_of(s), row0_of(s) + tid, l, di);
    }
  };
  auto put_stats = [&](int buf, float l, float di) {
    if (tid < Br) {
      sStat[buf * 2 * Br + tid] = l;
      sStat[buf * 2 * Br + Br + tid] = di;
    }
  };

  float dk[MT][NO][4], dv[MT][NO][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[i][n][e] = dv[i][n][e] = 0.f;
  uint32_t kf[T::kRegs ? MT : 1][T::kRegs ? D / 16 : 1][4];
  uint32_t vf[T::kRegs ? MT : 1][T::kRegs ? D / 16 : 1][4];

  const __half* gK = static_cast<const __half*>(p.k) + (sv.vl ? sv.sq.k0 * p.k_row_stride : b * p.k_batch_stride) + n0 * p.k_row_stride + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + (sv.vl ? sv.sq.k0 * p.v_row_stride : b * p.v_batch_stride) + n0 * p.v_row_stride + hk * p.v_head_stride;
  load_tile<A, Bc, D, NT>(sK, gK, p.k_row_stride, rows_k, tid);
  load_tile<A, Bc, D, NT>(sV, gV, p.v_row_stride, rows_k, tid);
  issue(0, 0);
  {
    float l, di;
    stats(0, l, di);
    put_stats(0, l, di);
  }
  cp_async_commit();

  for (int s = 0; s < steps; ++s) {
    const int buf = T::kStages == 2 ? (s & 1) : 0;
    const bool more = s + 1 < steps;
    cp_async_wait<0>();
    __syncthreads();  // step s's tiles landed; every warp is done with step s-1's buffer
    if constexpr (T::kRegs) {
      if (s == 0) {
        load_frags<D, MT>(kf, la, aK, wrow);
        load_frags<D, MT>(vf, la, aV, wrow);
      }
    }
    float l_next = INFINITY, di_next = 0.f;
    if constexpr (T::kStages == 2) {
      if (more) {  // the next block's copies overlap this whole step
        issue(s + 1, buf ^ 1);
        stats(s + 1, l_next, di_next);
      }
      cp_async_commit();
    }
    const int m0 = row0_of(s);
    const bool masked = kCausal && crosses_diagonal<Bc>(m0, n0, sv.nq(), sv.nk());
    const uint32_t qb = aS + buf * 2 * Br * D * 2, db = qb + Br * D * 2;
    const float* sL = sStat + buf * 2 * Br;
    const float* sDi = sL + Br;
#pragma unroll 1  // one chunk at a time: unrolled, the compiler keeps both chunks' values live
    for (int c0 = 0; c0 < Br; c0 += W) {
      // The warp's WJ n8 tiles of the chunk's S^T and dP^T: query columns cw.. (ColGroups)
      const int cw = c0 + wq;
      float st[MT][WJ][4], dp[MT][WJ][4];
      gemm_abt<A, D, MT, W / CG, T::kRegs, E>(st, kf, la, aK, wrow, lk, qb, cw);  // S^T = K Q^T
      gemm_abt<A, D, MT, W / CG, T::kRegs, E>(dp, vf, la, aV, wrow, lk, db, cw);  // dP^T = V dO^T
      if (masked) apply_mask_t<MT, WJ>(st, n0 + wrow, m0 + cw, lane, sv.nq(), sv.nk());
      if constexpr (kMod) {
        const ScoreMods m = ScoreMods::of(p, head_of(s), sv.nq(), sv.nk());
        const bool cap = p.softcap > 0.f;
#pragma unroll
        for (int j = 0; j < WJ; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int q = m0 + cw + 8 * j + 2 * t + e;  // lane (g, t) holds queries cw+8j+2t, +1
            const float l = sL[cw + 8 * j + 2 * t + e], di = sDi[cw + 8 * j + 2 * t + e];
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
              for (int hr = 0; hr < 2; ++hr) {
                const int k = n0 + wrow + 16 * i + (lane >> 2) + 8 * hr;
                mod_p_ds(m, cap, st[i][j][2 * hr + e], float(q + m.off - k), window_shows(m, q, k), l, di, st[i][j][2 * hr + e],
                         dp[i][j][2 * hr + e]);  // P^T, dS^T
              }
          }
      } else {
#pragma unroll
      for (int j = 0; j < WJ; ++j) {
        // Lane (g, t) holds query columns cw+8j+2t, +1 of every row.
        const float2 l2 = *reinterpret_cast<const float2*>(sL + cw + 8 * j + 2 * t);
        const float2 di2 = *reinterpret_cast<const float2*>(sDi + cw + 8 * j + 2 * t);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            p_ds(st[i][j][2 * hr], p.scale_log2, l2.x, di2.x, st[i][j][2 * hr], dp[i][j][2 * hr]);  // P^T, dS^T
            p_ds(st[i][j][2 * hr + 1], p.scale_log2, l2.y, di2.y, st[i][j][2 * hr + 1], dp[i][j][2 * hr + 1]);
          }
      }
      }
      if constexpr (CG == 1) {
        uint32_t pf[MT][W / 16][4];
        pack_a<MT, W, E>(st, pf);
        gemm_pb<A, D, MT, W, E>(dv, pf, la, db, c0);  // dV += P^T dO
        pack_a<MT, W, E>(dp, pf);
        gemm_pb<A, D, MT, W, E>(dk, pf, la, qb, c0);  // dK += dS^T Q
      } else {
        uint32_t pf[MT][W / 16][4], sf[MT][W / 16][4];  // the whole chunk's P^T and dS^T
        share_put<MT, WJ, CG, E>(st, xP, wg, lane);
        share_put<MT, WJ, CG, E>(dp, xS, wg, lane);
        group();
        share_get<MT, WJ, CG, E>(st, pf, xP, wg, lane);
        share_get<MT, WJ, CG, E>(dp, sf, xS, wg, lane);
        gemm_pb<A, D, MT, W, E, DC>(dv, pf, la, db + wcol * 2, c0);  // dV += P^T dO
        gemm_pb<A, D, MT, W, E, DC>(dk, sf, la, qb + wcol * 2, c0);  // dK += dS^T Q
        if (c0 + W < Br) group();  // the next chunk writes xP, xS
      }
    }
    if constexpr (T::kStages == 2) {
      if (more) put_stats(buf ^ 1, l_next, di_next);  // buffer buf^1 is free since the barrier above
    } else {
      if (more) {
        __syncthreads();  // every warp is done with this step's buffer
        issue(s + 1, 0);
        stats(s + 1, l_next, di_next);
        put_stats(0, l_next, di_next);
        cp_async_commit();
      }
    }
  }

  // Epilogue: dK (times the softmax scale) and dV as E, staged over K and V.
  __syncthreads();  // every warp is done reading K, V
  stage_rows<D, MT, E, DC>(dk, p.scale, sK + wcol, wrow, lane);
  stage_rows<D, MT, E, DC>(dv, 1.f, sV + wcol, wrow, lane);
  __syncthreads();
  store_rows<Bc, D, NT>(sK, gdK, p.dk_row_stride, rows_k, tid);
  store_rows<Bc, D, NT>(sV, gdV, p.dv_row_stride, rows_k, tid);
}

// ---- dQ ----
template <class T, bool kCausal, class E = __half, bool kVarlen = false, bool kMod = false>
__device__ __forceinline__ void bwd_dq_kernel(const BwdParams& p) {
  static_assert(!kMod || (!kCausal && !kVarlen), "the modified backward takes causal as its window, packed sequences at run time");
  static_assert(std::is_same<E, __half>::value || T::kArch == 80, "bf16 runs on the sm_80 path only");
  constexpr int A = T::kArch, D = T::kD, Br = T::kRows, Bc = T::kCols, NT = T::kThreads, MT = T::kMTiles;
  constexpr int W = T::kChunk, DC = T::kColsPerWarp, NO = DC / 8;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2;
  const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq;
  const int hk = h / (p.hq / p.hkv);
  // Causal: the last row blocks see the most keys; launching them first shortens the tail.
  const int m0 = (kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * Br;
  // The warp's first query row in the CTA, first dQ column and first key
  // column of a chunk's S (as dK/dV's).
  constexpr int CG = T::kColGroups, WJ = W / 8 / CG;
  const int wrow = (CG == 1 ? warp : warp % T::kRowWarps) * 16 * MT;
  const int wcol = CG == 1 ? 0 : warp / T::kRowWarps * DC;
  const int wg = CG == 1 ? 0 : warp / T::kRowWarps, wk = wg * (W / CG);
  // ColGroups > 1: the row group's dS fragments (share_put/get), its barrier.
  uint2* xS = reinterpret_cast<uint2*>(smem_raw + T::kShareOffset) + (warp % T::kRowWarps) * MT * (W / 8) * 32;
  const GroupSync group{1 + warp % T::kRowWarps, 32 * CG};
  const auto sv = seq_view<kVarlen, kMod>(p, b);
  if (sv.vl && m0 >= sv.nq()) return;  // past this sequence's rows
  const int rows_q = min(Br, sv.nq() - m0);

  __half* gdQ = static_cast<__half*>(p.dq) + (sv.vl ? sv.sq.q0 * p.dq_row_stride : b * p.dq_batch_stride) + m0 * p.dq_row_stride + h * p.dq_head_stride;
  KeyBlocks kb = key_blocks<Br, Bc, kCausal>(m0, sv.nq(), sv.nk());
  int n_begin = 0, n_full = 0;  // kMod: blocks [n_begin, n_full) need the element mask too
  if constexpr (kMod) {
    const WindowBlocks wb = window_blocks<Br, Bc>(m0, sv.nq(), sv.nk(), p.window_left, p.window_right);
    n_begin = wb.n_begin, n_full = wb.n_full, kb = KeyBlocks{wb.n_end, wb.n_mask};
  }
  if (kMod ? kb.n_end <= n_begin : kb.n_end == 0) {  // causal with Nq > Nk (varlen: or no key): no row here sees a key
    store_zero_rows<Br, D, NT>(gdQ, p.dq_row_stride, rows_q, tid);
    return;
  }

  // Shared memory: Q | dO | (K | V)[Stages].
  __half* sQ = smem;
  __half* sdO = sQ + Br * D;
  __half* sKV = sdO + Br * D;
  const LdAddr<D, kRowsFirst> la(lane);
  const LdAddr<D, kChunksFirst> lk(lane);
  const uint32_t aQ = smem_u32(sQ), adO = smem_u32(sdO), aKV = smem_u32(sKV);

  const __half* gQ = static_cast<const __half*>(p.q) + (sv.vl ? sv.sq.q0 * p.q_row_stride : b * p.q_batch_stride) + m0 * p.q_row_stride + h * p.q_head_stride;
  const __half* gdO = static_cast<const __half*>(p.dout) + (sv.vl ? sv.sq.q0 * p.do_row_stride : b * p.do_batch_stride) + m0 * p.do_row_stride + h * p.do_head_stride;
  const __half* gK = static_cast<const __half*>(p.k) + (sv.vl ? sv.sq.k0 * p.k_row_stride : b * p.k_batch_stride) + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + (sv.vl ? sv.sq.k0 * p.v_row_stride : b * p.v_batch_stride) + hk * p.v_head_stride;
  auto issue = [&](int n, int buf) {
    __half* dst = sKV + buf * 2 * Bc * D;
    load_tile<A, Bc, D, NT>(dst, gK + n * Bc * p.k_row_stride, p.k_row_stride, sv.nk() - n * Bc, tid);
    load_tile<A, Bc, D, NT>(dst + Bc * D, gV + n * Bc * p.v_row_stride, p.v_row_stride, sv.nk() - n * Bc, tid);
  };

  // L and Di of the lane's rows (g and g+8 of each m16 tile).
  float lr[MT][2], di_r[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      if (sv.vl) row_stats(p, sv.sq, h, m0 + wrow + 16 * i + g + 8 * hh, lr[i][hh], di_r[i][hh]);
      else row_stats(p, b, h, m0 + wrow + 16 * i + g + 8 * hh, lr[i][hh], di_r[i][hh]);
    }

  float acc[MT][NO][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][n][e] = 0.f;
  uint32_t qf[T::kRegs ? MT : 1][T::kRegs ? D / 16 : 1][4];
  uint32_t df[T::kRegs ? MT : 1][T::kRegs ? D / 16 : 1][4];

  load_tile<A, Br, D, NT>(sQ, gQ, p.q_row_stride, rows_q, tid);
  load_tile<A, Br, D, NT>(sdO, gdO, p.do_row_stride, rows_q, tid);
  issue(n_begin, 0);
  cp_async_commit();

  for (int n = n_begin; n < kb.n_end; ++n) {
    const int buf = T::kStages == 2 ? ((n - n_begin) & 1) : 0;
    const bool more = n + 1 < kb.n_end;
    cp_async_wait<0>();
    __syncthreads();  // K_n, V_n landed; every warp is done with step n-1's buffer
    if constexpr (T::kRegs) {
      if (n == n_begin) {
        load_frags<D, MT>(qf, la, aQ, wrow);
        load_frags<D, MT>(df, la, adO, wrow);
      }
    }
    if constexpr (T::kStages == 2) {
      if (more) issue(n + 1, buf ^ 1);
      cp_async_commit();
    }
    const uint32_t kbase = aKV + buf * 2 * Bc * D * 2, vbase = kbase + Bc * D * 2;
    const bool masked = n >= kb.n_mask || n < n_full;
#pragma unroll 1  // one chunk at a time: unrolled, the compiler keeps both chunks' values live
    for (int c0 = 0; c0 < Bc; c0 += W) {
      // The warp's WJ n8 tiles of the chunk's S and dP: key columns cw.. (ColGroups)
      const int cw = c0 + wk;
      float st[MT][WJ][4], dp[MT][WJ][4];
      gemm_abt<A, D, MT, W / CG, T::kRegs, E>(st, qf, la, aQ, wrow, lk, kbase, cw);   // S = Q K^T
      gemm_abt<A, D, MT, W / CG, T::kRegs, E>(dp, df, la, adO, wrow, lk, vbase, cw);  // dP = dO V^T
      if constexpr (kMod) {
        const ScoreMods m = ScoreMods::of(p, h, sv.nq(), sv.nk());
        const bool cap = p.softcap > 0.f;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < WJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int q = m0 + wrow + 16 * i + g + 8 * (e >> 1), k = n * Bc + cw + 8 * j + 2 * (lane & 3) + (e & 1);
              mod_p_ds(m, cap, st[i][j][e], float(q + m.off - k), !masked || window_shows(m, q, k), lr[i][e >> 1], di_r[i][e >> 1],
                       st[i][j][e], dp[i][j][e]);  // dS
            }
      } else {
      if (masked) apply_mask<MT, WJ, kCausal>(st, m0 + wrow, n * Bc + cw, lane, sv.nq(), sv.nk());
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < WJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            p_ds(st[i][j][e], p.scale_log2, lr[i][e >> 1], di_r[i][e >> 1], st[i][j][e], dp[i][j][e]);  // P (unused after), dS
          }
      }
      uint32_t pf[MT][W / 16][4];
      if constexpr (CG == 1) {
        pack_a<MT, W, E>(dp, pf);
      } else {  // the whole chunk's dS
        share_put<MT, WJ, CG, E>(dp, xS, wg, lane);
        group();
        share_get<MT, WJ, CG, E>(dp, pf, xS, wg, lane);
      }
      gemm_pb<A, D, MT, W, E, DC>(acc, pf, la, kbase + wcol * 2, c0);  // dQ += dS K
      if (CG > 1 && c0 + W < Bc) group();  // the next chunk writes xS
    }
    if constexpr (T::kStages == 1) {
      if (more) {
        __syncthreads();  // every warp is done with K_n, V_n
        issue(n + 1, 0);
        cp_async_commit();
      }
    }
  }

  __syncthreads();  // every warp is done reading Q, dO
  stage_rows<D, MT, E, DC>(acc, p.scale, sQ + wcol, wrow, lane);
  __syncthreads();
  store_rows<Br, D, NT>(sQ, gdQ, p.dq_row_stride, rows_q, tid);
}

}  // namespace fa2
