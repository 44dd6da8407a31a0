// rung3_mma.cuh: rung 3 of the kernel ladder. Tensor cores: a warp computes
// S = Q K^T and O += P V for 16 query rows at once with mma.sync m16n8k8 (fp16
// in, fp32 accumulate; the same instruction on Turing and on sm_80+). Each lane
// holds a fixed piece of every 16x8 result tile (mma.cuh has the layout), so
// the online softmax now works on a block of Bc keys per step, on those pieces
// (softmax.cuh, the shipped kernels' own), and the mask on the diagonal and
// ragged blocks only (mask.cuh). Fragments are read from plain row-major
// shared tiles 32 bits at a time; the two halves of a V fragment come from two
// rows, so they are read one 16-bit value at a time.
#pragma once
#include "common.cuh"
#include "../mask.cuh"
#include "../softmax.cuh"
#include "../gemm.cuh"

namespace fa2 {
namespace ladder {

__device__ __forceinline__ uint32_t ld32(const __half* s) { return *reinterpret_cast<const uint32_t*>(s); }
__device__ __forceinline__ uint32_t pack2(__half lo, __half hi) {
  return static_cast<uint32_t>(__half_as_ushort(lo)) | static_cast<uint32_t>(__half_as_ushort(hi)) << 16;
}

struct Rung3 {
  static constexpr int kBr = 64, kBc = 64, kThreads = 128;  // 4 warps x 16 query rows

  template <int D, bool kCausal>
  __device__ __forceinline__ static void run(const FwdParams& p) {
    constexpr int Br = kBr, Bc = kBc, NT = kThreads;
    constexpr int NS = Bc / 8, NO = D / 8;  // n8 tiles of S and of O
    __shared__ __align__(16) __half sQ[Br * D], sK[Bc * D], sV[Bc * D];
    const Cta c(p, Br);
    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wrow = 16 * (tid >> 5);  // the warp's first row in the CTA
    const int rows_q = min(Br, p.nq - c.m0);
    const KeyBlocks kb = key_blocks<Br, Bc, kCausal>(c.m0, p.nq, p.nk);

    copy_rows<Br, D, NT>(sQ, c.q, p.q_row_stride, rows_q, tid);
    float o[1][NO][4] = {};
    OnlineSoftmax<1> sm;
    sm.init();
    for (int n = 0; n < kb.n_end; ++n) {
      __syncthreads();  // every warp is done with the previous block
      copy_rows<Bc, D, NT>(sK, c.k + n * Bc * p.k_row_stride, p.k_row_stride, p.nk - n * Bc, tid);
      copy_rows<Bc, D, NT>(sV, c.v + n * Bc * p.v_row_stride, p.v_row_stride, p.nk - n * Bc, tid);
      __syncthreads();

      // S = Q K^T, 16 head-dim columns per mma: A = Q rows (g, g+8) x columns (2t, 2t+8),
      // B = K^T, i.e. K row g of each 8-key tile, the same columns.
      float s[1][NS][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const __half* qa = sQ + (wrow + g) * D + 16 * kk + 2 * t;
        const uint32_t a[4] = {ld32(qa), ld32(qa + 8 * D), ld32(qa + 8), ld32(qa + 8 * D + 8)};
#pragma unroll
        for (int j = 0; j < NS; ++j) {
          const __half* kb_ = sK + (8 * j + g) * D + 16 * kk + 2 * t;
          mma_k16<75>(s[0][j], a, ld32(kb_), ld32(kb_ + 8));
        }
      }
      if (n >= kb.n_mask) apply_mask<1, NS, kCausal>(s, c.m0 + wrow, n * Bc, lane, p.nq, p.nk);
      sm.step(s, o, p.scale_log2);  // m, l, P = exp2(S - m); O rescaled when m grew

      // O += P V: P (fp16) is already an A fragment; B = V, keys 2t, 2t+1 (+8) of column g.
      uint32_t pf[1][Bc / 16][4];
      pack_a<1, Bc>(s, pf);
#pragma unroll
      for (int kk = 0; kk < Bc / 16; ++kk)
#pragma unroll
        for (int dn = 0; dn < NO; ++dn) {
          const __half* vb = sV + (16 * kk + 2 * t) * D + 8 * dn + g;
          mma_k16<75>(o[0][dn], pf[0][kk], pack2(vb[0], vb[D]), pack2(vb[8 * D], vb[9 * D]));
        }
    }

    // O /= l, L = m*scale + ln l; lane (g, t) writes columns 2t, 2t+1 of rows g and g+8.
    float lse[1][2];
    sm.finish(o, p.scale, lse);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = wrow + g + 8 * hh;
      if (row >= rows_q) continue;
#pragma unroll
      for (int dn = 0; dn < NO; ++dn)
        *reinterpret_cast<uint32_t*>(c.o + row * p.o_row_stride + 8 * dn + 2 * t) =
            pack_half2(o[0][dn][2 * hh], o[0][dn][2 * hh + 1]);
      if (t == 0) c.lse[row] = lse[0][hh];
    }
  }
};

}  // namespace ladder
}  // namespace fa2
