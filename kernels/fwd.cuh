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
#pragma once
#include <cuda_fp16.h>
#include "params.cuh"
#include "traits.cuh"
#include "mma.cuh"
#include "mask.cuh"
#include "softmax.cuh"

namespace fa2 {

// ldmatrix addressing. A slab is 16 rows x 2 chunks (16 x 16 fp16) = four 8x8
// matrices; lane l gives one row address of matrix l/8. Two lane orders:
//   kRowsFirst (Q as A, V as B via .trans): matrices (rows 0-7, 8-15) x (chunk 2c, 2c+1),
//     i.e. a0..a3 of an A fragment, or b0,b1 of n-tile 2c then of 2c+1 for V;
//   kChunksFirst (K as B): (chunk 2c, 2c+1) x (rows 0-7, 8-15), i.e. b0,b1 of key
//     n-tile 0 then of n-tile 1, so each mma's B pair is two adjacent registers
//     (the other order costs two register moves per mma).
// The swizzle only touches the low chunk bits, so the lane's XOR part takes
// (M+1)/2 values, precomputed once; the rest of every address is an immediate.
enum LdOrder { kRowsFirst, kChunksFirst };
template <int D, LdOrder O>
struct LdAddr {
  static constexpr int M = (D / 8) % 8 == 0 ? 7 : 3;
  static constexpr int X = (M + 1) / 2;
  uint32_t lane_row;  // byte offset of the lane's row inside a slab
  uint32_t x[X];      // byte offset of chunk (2u + hi) after the swizzle
  __device__ __forceinline__ explicit LdAddr(int lane) {
    const int row = O == kRowsFirst ? (lane & 15) : ((lane & 7) | ((lane >> 4) << 3));
    const int hi = O == kRowsFirst ? (lane >> 4) : ((lane >> 3) & 1);
    lane_row = row * D * 2;
#pragma unroll
    for (int u = 0; u < X; ++u) x[u] = ((2 * u + hi) ^ Swizzle<D>::key(row)) * 16;
  }
  // Byte address of the lane's matrix row for slab row `row0` (multiple of 16) and chunk pair c2 (even).
  __device__ __forceinline__ uint32_t at(uint32_t base, int row0, int c2) const {
    return base + lane_row + row0 * D * 2 + (c2 & ~M) * 16 + x[(c2 & M) >> 1];
  }
};

// Tile copies: thread tid moves chunk c = tid % CP of rows r0 + k*RS, r0 = tid / CP,
// RS = NT / CP, with CP = D/8 rounded up to a power of two (D 96: 12 of 16 lanes
// busy). A fixed chunk per thread keeps each step's addresses one add apart
// instead of a division per chunk (which the compiler hoists into registers).
template <int ROWS, int D, int NT>
struct TileMap {
  static constexpr int C = D / 8;
  static constexpr int CP = C <= 4 ? 4 : C <= 8 ? 8 : C <= 16 ? 16 : 32;
  static constexpr int RS = NT / CP, N = ROWS / RS;
  static_assert(NT % CP == 0 && ROWS % RS == 0, "tile copy must split evenly over the CTA");
  int r0, c;
  __device__ __forceinline__ explicit TileMap(int tid) : r0(tid / CP), c(tid % CP) {}
  __device__ __forceinline__ bool active() const { return CP == C || c < C; }
};

// Copy ROWS x D fp16 from global (row stride `ld` elements) to swizzled smem with
// cp.async; rows >= valid are zero-filled (keys past Nk must be 0 in V: P is 0
// there but 0 * garbage may be NaN).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void cp_tile(__half* s, const __half* g, int64_t ld, int valid, int tid) {
  const TileMap<ROWS, D, NT> m(tid);
  if (!m.active()) return;
  const __half* src = g + m.r0 * ld + m.c * 8;
  const int lim = valid - m.r0;  // row r0 + k*RS exists iff k*RS < lim (compare with an immediate)
#pragma unroll
  for (int k = 0; k < m.N; ++k) {
    const bool ok = k * m.RS < lim;
    cp_async_16(smem_u32(s + Swizzle<D>::offset(m.r0 + k * m.RS, m.c)), ok ? src : g, ok ? 16 : 0);
    src += m.RS * ld;
  }
}

// The Turing path's prefetch: one tile held in registers between the global
// load (issued a whole step early) and the shared-memory store.
template <int ROWS, int D, int NT>
struct RegTile {
  using Map = TileMap<ROWS, D, NT>;
  uint4 r[Map::N];
  __device__ __forceinline__ void load(const __half* g, int64_t ld, int valid, int tid) {
    const Map m(tid);
    if (!m.active()) return;
    const __half* src = g + m.r0 * ld + m.c * 8;
    const int lim = valid - m.r0;
#pragma unroll
    for (int k = 0; k < Map::N; ++k) {
      r[k] = k * Map::RS < lim ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0, 0, 0, 0);
      src += Map::RS * ld;
    }
  }
  __device__ __forceinline__ void store(__half* s, int tid) const {
    const Map m(tid);
    if (!m.active()) return;
#pragma unroll
    for (int k = 0; k < Map::N; ++k)
      *reinterpret_cast<uint4*>(s + Swizzle<D>::offset(m.r0 + k * Map::RS, m.c)) = r[k];
  }
};

template <class T, bool kCausal>
__device__ __forceinline__ void fwd_kernel(const FwdParams& p) {
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
  // the tail where a few long CTAs run alone.
  const int m0 = (kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * Br;
  const int wrow = warp * 16 * MT;    // the warp's first row in the CTA

  const __half* gQ = static_cast<const __half*>(p.q) + b * p.q_batch_stride + m0 * p.q_row_stride + h * p.q_head_stride;
  const __half* gK = static_cast<const __half*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
  __half* gO = static_cast<__half*>(p.o) + b * p.o_batch_stride + m0 * p.o_row_stride + h * p.o_head_stride;
  float* gL = p.lse + (static_cast<int64_t>(b) * p.hq + h) * p.nq + m0;
  const int rows_q = min(Br, p.nq - m0);

  const KeyBlocks kb = key_blocks<Br, Bc, kCausal>(m0, p.nq, p.nk);
  if (kb.n_end == 0) {  // causal with Nq > Nk: no row here sees a key
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

  auto load_q_regs = [&]() {
    if constexpr (T::kQRegs) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) ldmatrix_x4(qf[i][kk], la.at(aQ, wrow + 16 * i, 2 * kk));
    }
  };

  // S = Q K^T for the K block in buffer at smem address kbase.
  auto gemm_qk = [&](float (&s)[MT][NS][4], uint32_t kbase) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if constexpr (T::kQRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[i][e] = qf[i][kk][e];
        } else {
          ldmatrix_x4(a[i], la.at(aQ, wrow + 16 * i, 2 * kk));
        }
      }
#pragma unroll
      for (int jj = 0; jj < NS / 2; ++jj) {
        // bk: b0, b1 of keys 16jj+0..7, then b0, b1 of keys 16jj+8..15 (d chunks 2kk, 2kk+1).
        uint32_t bk[4];
        ldmatrix_x4(bk, lk.at(kbase, 16 * jj, 2 * kk));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_k16<A>(s[i][2 * jj], a[i], bk[0], bk[1]);
          mma_k16<A>(s[i][2 * jj + 1], a[i], bk[2], bk[3]);
        }
      }
    }
  };

  // P (fp16) in A-fragment layout: k16 step kk of PV takes S n-tiles 2kk, 2kk+1.
  // Packing right after the softmax frees the fp32 scores before PV starts.
  auto pack_p = [&](const float (&s)[MT][NS][4], uint32_t (&pf)[MT][KB][4]) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int kk = 0; kk < KB; ++kk) {
        pf[i][kk][0] = pack_half2(s[i][2 * kk][0], s[i][2 * kk][1]);
        pf[i][kk][1] = pack_half2(s[i][2 * kk][2], s[i][2 * kk][3]);
        pf[i][kk][2] = pack_half2(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
        pf[i][kk][3] = pack_half2(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
      }
  };

  // O += P V for the V block at smem address vbase.
  auto gemm_pv = [&](const uint32_t (&pf)[MT][KB][4], uint32_t vbase) {
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
#pragma unroll
      for (int dd = 0; dd < NO / 2; ++dd) {
        // .trans matrices: keys 16kk+0..7 | +8..15 (b0 | b1) x d chunk 2dd | 2dd+1.
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, la.at(vbase, 16 * kk, 2 * dd));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_k16<A>(o[i][2 * dd], pf[i][kk], bv[0], bv[1]);
          mma_k16<A>(o[i][2 * dd + 1], pf[i][kk], bv[2], bv[3]);
        }
      }
    }
  };

  auto kv_rows = [&](int n) { return p.nk - n * Bc; };

  if constexpr (A == 80) {
    cp_tile<Br, D, NT>(sQ, gQ, p.q_row_stride, rows_q, tid);
    cp_tile<Bc, D, NT>(sK, gK, p.k_row_stride, kv_rows(0), tid);
    if constexpr (T::kStages == 2) cp_tile<Bc, D, NT>(sV, gV, p.v_row_stride, kv_rows(0), tid);
    cp_async_commit();
    if constexpr (T::kQRegs) {
      cp_async_wait<0>();
      __syncthreads();
      load_q_regs();
    }
    for (int n = 0; n < kb.n_end; ++n) {
      const int buf = T::kStages == 2 ? (n & 1) : 0;
      const uint32_t kbase = aK + buf * Bc * D * 2, vbase = aV + buf * Bc * D * 2;
      cp_async_wait<0>();
      __syncthreads();  // K_n (and V_n) landed; every warp is done with step n-1's buffers
      if constexpr (T::kStages == 2) {
        if (n + 1 < kb.n_end) {  // the next block's copy overlaps this whole step
          cp_tile<Bc, D, NT>(sK + (buf ^ 1) * Bc * D, gK + (n + 1) * Bc * p.k_row_stride, p.k_row_stride, kv_rows(n + 1), tid);
          cp_tile<Bc, D, NT>(sV + (buf ^ 1) * Bc * D, gV + (n + 1) * Bc * p.v_row_stride, p.v_row_stride, kv_rows(n + 1), tid);
        }
        cp_async_commit();
      } else {
        cp_tile<Bc, D, NT>(sV, gV + n * Bc * p.v_row_stride, p.v_row_stride, kv_rows(n), tid);
        cp_async_commit();
      }
#pragma unroll
      for (int sp = 0; sp < T::kSplits; ++sp) {
        float s[MT][NS][4];
        gemm_qk(s, kbase + sp * Bs * D * 2);
        if (n >= kb.n_mask) apply_mask<MT, NS, kCausal>(s, m0 + wrow, n * Bc + sp * Bs, lane, p.nq, p.nk);
        if constexpr (T::kStages == 1) {
          cp_async_wait<0>();
          __syncthreads();  // V_n landed; every warp is done reading K_n
          if (n + 1 < kb.n_end)
            cp_tile<Bc, D, NT>(sK, gK + (n + 1) * Bc * p.k_row_stride, p.k_row_stride, kv_rows(n + 1), tid);
          cp_async_commit();
        }
        sm.step(s, o, p.scale_log2);
        uint32_t pf[MT][KB][4];
        pack_p(s, pf);
        gemm_pv(pf, vbase + sp * Bs * D * 2);
      }
    }
  } else {
    {  // Q through the K/V area into registers.
      RegTile<Br, D, NT> rq;
      rq.load(gQ, p.q_row_stride, rows_q, tid);
      rq.store(sQ, tid);
      __syncthreads();
      load_q_regs();
      if constexpr (T::kQAliasKV) __syncthreads();  // K/V stores below overwrite Q
    }
    RegTile<Bc, D, NT> rk, rv;
    rk.load(gK, p.k_row_stride, kv_rows(0), tid);
    rv.load(gV, p.v_row_stride, kv_rows(0), tid);
    rk.store(sK, tid);
    rv.store(sV, tid);
    __syncthreads();
    for (int n = 0; n < kb.n_end; ++n) {
      const bool more = n + 1 < kb.n_end;
      if (more) {  // global loads in flight during the whole step
        rk.load(gK + (n + 1) * Bc * p.k_row_stride, p.k_row_stride, kv_rows(n + 1), tid);
        rv.load(gV + (n + 1) * Bc * p.v_row_stride, p.v_row_stride, kv_rows(n + 1), tid);
      }
#pragma unroll
      for (int sp = 0; sp < T::kSplits; ++sp) {
        float s[MT][NS][4];
        gemm_qk(s, aK + sp * Bs * D * 2);
        if (n >= kb.n_mask) apply_mask<MT, NS, kCausal>(s, m0 + wrow, n * Bc + sp * Bs, lane, p.nq, p.nk);
        sm.step(s, o, p.scale_log2);
        uint32_t pf[MT][KB][4];
        pack_p(s, pf);
        gemm_pv(pf, aV + sp * Bs * D * 2);
      }
      if (more) {
        __syncthreads();  // every warp is done with K_n, V_n
        rk.store(sK, tid);
        rv.store(sV, tid);
        __syncthreads();
      }
    }
  }

  // Epilogue: normalise, stage O (fp16) through shared memory for 16-byte row
  // stores, write L for the rows that exist.
  float lse[MT][2];
  sm.finish(o, p.scale, lse);
  __syncthreads();  // all warps are done with the K/V (Turing) or Q area
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = wrow + 16 * i + g + 8 * hh;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<uint32_t*>(sQ + Swizzle<D>::offset(row, n) + 2 * t) =
            pack_half2(o[i][n][2 * hh], o[i][n][2 * hh + 1]);
      if (t == 0 && row < rows_q) gL[row] = lse[i][hh];
    }
  __syncthreads();
#pragma unroll
  for (int it = 0; it < Br * C / NT; ++it) {
    const int idx = it * NT + tid, row = idx / C, c = idx % C;
    if (row < rows_q)
      *reinterpret_cast<uint4*>(gO + row * p.o_row_stride + c * 8) =
          *reinterpret_cast<const uint4*>(sQ + Swizzle<D>::offset(row, c));
  }
}

// The arch-path guard: sm_80 kernels use m16n8k16 and cp.async, which an sm_75
// build cannot emit; there they trap (the table never picks them below sm_80).
template <class T, bool kCausal>
__device__ __forceinline__ void fwd_entry(const FwdParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  if constexpr (T::kArch >= 80) {
    __trap();
  } else
#endif
  {
    fwd_kernel<T, kCausal>(p);
  }
}

// Template entry for the dev harness (tuning candidates); the shipped kernels are
// the extern "C" ones in fa2.cu.
template <class T, bool kCausal>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) fwd_tpl(const FwdParams p) {
  fwd_entry<T, kCausal>(p);
}

}  // namespace fa2
