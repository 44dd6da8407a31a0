// rung2_smem.cuh: rung 2 of the kernel ladder. Rung 1 reads every K and V row
// from global memory once per query row; here the CTA's Br threads first copy
// a block of Bc keys (K_j, V_j) into shared memory together, 16 bytes per
// thread per step, and then every thread walks the block from there: each K/V
// byte leaves global memory once per CTA instead of once per row.
#pragma once
#include "common.cuh"

namespace fa2 {
namespace ladder {

struct Rung2 {
  static constexpr int kBr = 64, kBc = 64, kThreads = kBr;  // one thread per query row, Bc keys per block

  template <int D, bool kCausal>
  __device__ __forceinline__ static void run(const FwdParams& p) {
    constexpr int Br = kBr, Bc = kBc;
    __shared__ __align__(16) __half sK[Bc * D], sV[Bc * D];
    const Cta c(p, Br);
    const int r = threadIdx.x, i = c.m0 + r;
    const bool live = i < p.nq;  // rows past Nq still help to copy

    float q[D], o[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      q[d] = live ? __half2float(c.q[r * p.q_row_stride + d]) * p.scale_log2 : 0.f;
      o[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const int n_end = live ? key_end<kCausal>(i, p.nq, p.nk) : 0;
    const int cta_end = key_end<kCausal>(min(c.m0 + Br, p.nq) - 1, p.nq, p.nk);  // the CTA's last row sees the most
    for (int j0 = 0; j0 < cta_end; j0 += Bc) {
      __syncthreads();  // every thread is done with the previous block
      copy_rows<Bc, D, Br>(sK, c.k + j0 * p.k_row_stride, p.k_row_stride, p.nk - j0, r);
      copy_rows<Bc, D, Br>(sV, c.v + j0 * p.v_row_stride, p.v_row_stride, p.nk - j0, r);
      __syncthreads();  // the block has landed
      const int jn = min(Bc, n_end - j0);
      for (int jj = 0; jj < jn; ++jj) {
        const __half* kj = sK + jj * D;
        const __half* vj = sV + jj * D;
        float s = 0.f;
#pragma unroll
        for (int d = 0; d < D; ++d) s = fmaf(q[d], __half2float(kj[d]), s);
        const float m_new = fmaxf(m, s);
        const float corr = exp2f(m - m_new);
        const float pj = exp2f(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int d = 0; d < D; ++d) o[d] = fmaf(o[d], corr, pj * __half2float(vj[d]));
        m = m_new;
      }
    }
    if (!live) return;

    const float inv = n_end > 0 ? 1.f / l : 0.f;
#pragma unroll
    for (int d = 0; d < D; ++d) c.o[r * p.o_row_stride + d] = __float2half_rn(o[d] * inv);
    c.lse[r] = n_end > 0 ? (m + log2f(l)) * kLn2 : -INFINITY;
  }
};

}  // namespace ladder
}  // namespace fa2
