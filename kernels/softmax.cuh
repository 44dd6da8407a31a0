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

// exp2 on the FMA pipe, for the modified kernels where MUFU is the bottleneck
// (softcap: MUFU.TANH and MUFU.EX2 per score). x = n + f with n = round(x)
// (the 1.5*2^23 add leaves n in the low mantissa bits), 2^f on [-1/2, 1/2] by a
// degree-3 relative-error minimax (Remez): |rel err| <= 7.5e-5 = 2^-13.7, under
// fp16's unit roundoff 2^-11 (and bf16's 2^-8) to which P is rounded for PV,
// and 2^n added to the exponent field. x is clamped to -126 so the exponent
// stays >= 0: not for -inf (a masked score would give ~2^-126, not 0), so only
// blocks with every score finite may use it; a 2^-126 for a smaller true value
// is lost against l >= 1 (the row max gives p = 1).
__device__ __forceinline__ float exp2_poly(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  x = fmaxf(x, -126.f);
  const float t = __fadd_rn(x, kRound);
  const float f = __fsub_rn(x, __fsub_rn(t, kRound));
  const float q = fmaf(fmaf(fmaf(0.055171669f, f, 0.24261112f), f, 0.69326099f), f, 0.99992807f);
  return __int_as_float(__float_as_int(q) + (__float_as_int(t) << 23));
}

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
  // warp-uniform, so no lane diverges. kPoly > 0 (modified kernels, blocks
  // without a masked score only): the first kPoly n8 tiles of each row take
  // exp2_poly, moving that share of the exp2s from the MUFU pipe to FMA/ALU.
  template <int kPoly = 0, int NS, int NO>
  __device__ __forceinline__ void step(float (&s)[MT][NS][4], float (&o)[MT][NO][4], float scale_log2) {
    static_assert(kPoly >= 0 && kPoly <= NS, "kPoly counts n8 tiles of S");
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
            const float x = fmaf(s[i][j][2 * h + e], scale_log2, -base);
            float p;
            if constexpr (kPoly > 0) p = j < kPoly ? exp2_poly(x) : exp2_approx(x);
            else p = exp2_approx(x);
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
