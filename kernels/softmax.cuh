// softmax.cuh: FA2 online softmax in fp32, per query row.
//
// Per row the state is m (running max of raw scores) and l (running sum of
// exp2(s*scale*log2e - m*scale*log2e)); O is rescaled by exp2((m_old-m_new)*...)
// whenever m grows. The scale is folded into one FFMA per score and exp2 is the
// hardware ex2. Each row lives in the 4 lanes of a quad (t = 0..3), so the row
// max needs 2 xor-shuffles; l stays a per-lane partial sum until the end.
#pragma once
#include "mma.cuh"

namespace fa2 {

template <int MT>
struct OnlineSoftmax {
  float m[MT][2];  // [m-tile][row g, row g+8]
  float l[MT][2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) { m[i][h] = -INFINITY; l[i][h] = 0.f; }
  }

  // Turns the scores of one key block into P (in place, unnormalised) and
  // rescales the O accumulators of the same rows. Rescaling costs one FMUL per O
  // element per block, so it is skipped when no row of the warp got a larger
  // max (the common case once a row has seen a few blocks); the test is
  // warp-uniform, so no lane diverges.
  template <int NS, int NO>
  __device__ __forceinline__ void step(float (&s)[MT][NS][4], float (&o)[MT][NO][4], float scale_log2) {
    float corr[MT][2];
    bool grew = false;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = m[i][h];
#pragma unroll
        for (int j = 0; j < NS; ++j) mx = fmaxf(mx, fmaxf(s[i][j][2 * h], s[i][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row that has seen only masked keys keeps m = -inf: subtract 0
        // instead so exp2 gives 0, not NaN (-inf - -inf).
        const float base = mx == -INFINITY ? 0.f : mx * scale_log2;
        corr[i][h] = mx == m[i][h] ? 1.f : exp2_approx(m[i][h] * scale_log2 - base);
        grew |= mx != m[i][h];
        m[i][h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < NS; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = exp2_approx(fmaf(s[i][j][2 * h + e], scale_log2, -base));
            s[i][j][2 * h + e] = p;
            sum += p;
          }
        }
        l[i][h] = fmaf(l[i][h], corr[i][h], sum);
      }
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          o[i][n][0] *= corr[i][0];
          o[i][n][1] *= corr[i][0];
          o[i][n][2] *= corr[i][1];
          o[i][n][3] *= corr[i][1];
        }
    }
  }

  // Completes l across the quad, normalises O, returns the natural-log LSE per
  // row (-inf, with O = 0, for rows that saw no key).
  template <int NO>
  __device__ __forceinline__ void finish(float (&o)[MT][NO][4], float scale, float (&lse)[MT][2]) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = l[i][h];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const bool seen = sum > 0.f;
        const float inv = seen ? 1.f / sum : 0.f;
        lse[i][h] = seen ? fmaf(m[i][h], scale, logf(sum)) : -INFINITY;
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          o[i][n][2 * h] *= inv;
          o[i][n][2 * h + 1] *= inv;
        }
      }
    }
  }
};

}  // namespace fa2
