// rung1_scalar.cuh: rung 1 of the kernel ladder. The FA2 forward pass as plain
// CUDA: one thread per query row, fp32 math, every K and V row read straight
// from global memory. The loop is chapter 4's box with B_c = 1: per key, a new
// running max m, the rescale factor of l and O, and one more term of each.
#pragma once
#include "common.cuh"

namespace fa2 {
namespace ladder {

struct Rung1 {
  static constexpr int kBr = 64, kBc = 1, kThreads = kBr;  // one thread per query row, one key per step

  template <int D, bool kCausal>
  __device__ __forceinline__ static void run(const FwdParams& p) {
    const Cta c(p, kBr);
    const int r = threadIdx.x, i = c.m0 + r;  // this thread's query row
    if (i >= p.nq) return;

    // q scaled by tau*log2(e): scores come out in log2 units, so exp becomes exp2.
    float q[D], o[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      q[d] = __half2float(c.q[r * p.q_row_stride + d]) * p.scale_log2;
      o[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const int n_end = key_end<kCausal>(i, p.nq, p.nk);
    for (int j = 0; j < n_end; ++j) {
      const __half* kj = c.k + j * p.k_row_stride;
      const __half* vj = c.v + j * p.v_row_stride;
      float s = 0.f;
#pragma unroll
      for (int d = 0; d < D; ++d) s = fmaf(q[d], __half2float(kj[d]), s);
      const float m_new = fmaxf(m, s);
      const float corr = exp2f(m - m_new);  // rescales l and O; 0 for the first key (m = -inf)
      const float pj = exp2f(s - m_new);
      l = l * corr + pj;
#pragma unroll
      for (int d = 0; d < D; ++d) o[d] = fmaf(o[d], corr, pj * __half2float(vj[d]));
      m = m_new;
    }

    // O = O / l and L = m + ln l (m is in log2 units); a row that sees no key
    // gets O = 0 and L = -inf.
    const float inv = n_end > 0 ? 1.f / l : 0.f;
#pragma unroll
    for (int d = 0; d < D; ++d) c.o[r * p.o_row_stride + d] = __float2half_rn(o[d] * inv);
    c.lse[r] = n_end > 0 ? (m + log2f(l)) * kLn2 : -INFINITY;
  }
};

}  // namespace ladder
}  // namespace fa2
