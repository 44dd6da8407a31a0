// n8.cuh: the transposed warp form, 8 query rows as the mma's n8 columns.
//
// Where a thread's registers cannot hold an m16 tile's O (16 rows x D: D/2
// fp32 per lane, 128 at D256) beside what else a step keeps (the Turing
// prefetch), a warp owns 8 rows as the mma's 8 columns instead: S^T = K Q^T
// (the keys are the mma's 16 rows, K from shared memory as the A operand; Q^T
// the B operand, ldmatrix from the 8 rows staged in shared memory each step,
// or with QRegs read once and kept: D/4 registers more), then O^T += V^T P^T
// (V read .trans as A; P^T is S^T's accumulator made a B fragment by one
// movmatrix per 8x8).
// O^T is D/4 fp32 per lane, half of the m16 form's, and each 16 keys cost
// D/16 + D/16 mma for 8 rows where the m16 form pays D/8 + D/8 for 16. Lane
// (g, t) holds keys g, g+8 of each 16 for rows 2t, 2t+1, so a row's max and
// sum reduce over g (the 8 lanes of a t).
// Users: the Turing D256 decode (decode.cuh, DecodeTile kRows 8: the 8 rows
// are packed GQA rows, one group per kv head; Q^T from shared memory, its
// prefetch leaves no room) and the Turing D256 forward (fwd.cuh's fwd_n8: Br =
// 8 x Warps, one head's query rows; QRegs, the Tile's, 3-4% faster on the
// H200's forced sm_75 path). As the sm_80 decode this form ran 1.00-1.02x as
// fast as the m16 one (H200): not worth a second kernel family where the m16
// form fits.
#pragma once
#include <cmath>
#include <cuda_fp16.h>
#include "traits.cuh"
#include "mma.cuh"
#include "mask.cuh"
#include "tile_io.cuh"

namespace fa2 {

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {  // an 8x8 of 16-bit values transposed across the warp
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// One warp's 8 rows against Bw keys per step (A: arch path, D: head dim, E:
// element type of Q, K, V and P; QRegs: Q^T's B fragments read once into
// registers, load_q, instead of once per step: D/4 registers).
template <int A, int D, int Bw, class E, bool QRegs = false>
struct WarpN8 {
  static constexpr int KD = D / 16, KT = Bw / 16, MD = D / 16;
  static_assert(KD % 2 == 0 && Bw % 16 == 0, "Q^T read two k16 steps per ldmatrix; whole m16 tiles of keys");
  float slope[2];  // ALiBi slope / unit of rows 2t, 2t+1
  float o[MD][4];  // O^T: columns 16mm + g (+8) of rows 2t, 2t+1
  float m[2], l[2], lse[2];
  uint32_t q[QRegs ? KD / 2 : 1][4];  // QRegs: Q^T's B fragments, k16 steps 2j, 2j+1 in q[j]

  // Q^T's B fragments for k16 steps kk, kk+1 from the warp's 8 rows at aQ:
  // matrices (rows 0-7) x chunks 2kk..2kk+3.
  __device__ __forceinline__ static void ld_q(uint32_t (&qb)[4], uint32_t aQ, int kk, int lane) {
    ldmatrix_x4(qb, aQ + (lane & 7) * D * 2 + ((2 * kk + (lane >> 3)) ^ Swizzle<D>::key(lane & 7)) * 16);
  }
  __device__ __forceinline__ void load_q(uint32_t aQ, int lane) {
    static_assert(QRegs, "only the QRegs form holds Q^T");
#pragma unroll
    for (int kk = 0; kk < KD; kk += 2) ld_q(q[kk / 2], aQ, kk, lane);
  }

  // Before the first step: O^T 0, no key seen; the rows' ALiBi slopes / unit.
  __device__ __forceinline__ void init(float slope0, float slope1) {
    slope[0] = slope0, slope[1] = slope1;
#pragma unroll
    for (int mm = 0; mm < MD; ++mm)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mm][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }

  // This warp's Bw keys of one block (col0 its first key; wkey its first row
  // in the buffers at kbase / vbase; aQ its 8 rows of Q, swizzled as rows
  // 0-7), the scores modified (ScoreMods' units) and, where mask, masked:
  // row r = row0 + 2t + e is query row i = r / group of a problem whose
  // row i sees keys [i+off-left, i+off+right] of [0, len) (-1: that side open).
  __device__ __forceinline__ void step(uint32_t aQ, uint32_t kbase, uint32_t vbase, int wkey, int col0, bool mask, int lane,
                                       int row0, int group, int len, int off, int left, int right, bool cap, bool alibi,
                                       float cap_in, float unit_log2) {
    const int g = lane >> 2, t = lane & 3;
    const LdAddr<D, kRowsFirst> la(lane);   // K as A
    const LdAddr<D, kChunksFirst> lk(lane);  // V^T as A (.trans)
    float s[KT][4];  // S^T: s[kt][2h+e] is key col0 + 16kt + g + 8h, packed row row0 + 2t + e
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[kt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KD; kk += 2) {
      uint32_t qb[4];
      if constexpr (QRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qb[e] = q[kk / 2][e];
      } else {
        ld_q(qb, aQ, kk, lane);
      }
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        uint32_t a[4];
        ldmatrix_x4(a, la.at(kbase, wkey + 16 * kt, 2 * kk));
        mma_k16<A, E>(s[kt], a, qb[0], qb[1]);
        ldmatrix_x4(a, la.at(kbase, wkey + 16 * kt, 2 * kk + 2));
        mma_k16<A, E>(s[kt], a, qb[2], qb[3]);
      }
    }
    int i[2];  // the query row of packed rows 2t, 2t+1
#pragma unroll
    for (int e = 0; e < 2; ++e) i[e] = (row0 + 2 * t + e) / group;
    if (cap) {
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[kt][e] = tanh_approx(s[kt][e] * cap_in);
    }
    if (alibi) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float dist0 = float(i[e] + off - col0 - g);  // i+off-j of the lane's first key
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            s[kt][2 * h + e] = fmaf(-slope[e], fabsf(dist0 - float(16 * kt + 8 * h)), s[kt][2 * h + e]);
      }
    }
    if (mask) {  // row i sees keys [i+off-left, i+off+right] of [0, len)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int lo = (left < 0 ? 0 : max(0, i[e] + off - left)) - col0 - g;
        const int hi = (right < 0 ? len - 1 : min(len - 1, i[e] + off + right)) - col0 - g;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int k = 16 * kt + 8 * h;
            if (k < lo || k > hi) s[kt][2 * h + e] = -INFINITY;
          }
      }
    }
    // The online softmax (softmax.cuh's, over the 8 lanes of a t).
    float corr[2];
    bool grew = false;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float mx = m[e];
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) mx = fmaxf(mx, fmaxf(s[kt][e], s[kt][2 + e]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float base = mx == -INFINITY ? 0.f : mx * unit_log2;  // a row without a key yet: exp2 gives 0
      corr[e] = mx == m[e] ? 1.f : exp2_approx(m[e] * unit_log2 - base);
      grew |= mx != m[e];
      m[e] = mx;
      float sum = 0.f;
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float pv = exp2_approx(fmaf(s[kt][2 * h + e], unit_log2, -base));
          s[kt][2 * h + e] = pv;
          sum += pv;
        }
      l[e] = fmaf(l[e], corr[e], sum);
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int mm = 0; mm < MD; ++mm) o[mm][0] *= corr[0], o[mm][1] *= corr[1], o[mm][2] *= corr[0], o[mm][3] *= corr[1];
    }
    // O^T += V^T P^T, 16 keys at a time.
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const uint32_t b0 = movmatrix_trans(pack2<E>(s[kt][0], s[kt][1]));  // keys 2t, 2t+1 of packed row g
      const uint32_t b1 = movmatrix_trans(pack2<E>(s[kt][2], s[kt][3]));  // keys 2t+8, 2t+9
#pragma unroll
      for (int mm = 0; mm < MD; ++mm) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, lk.at(vbase, wkey + 16 * kt, 2 * mm));
        mma_k16<A, E>(o[mm], a, b0, b1);
      }
    }
  }

  // l completed over the 8 lanes of a t, O normalised, the natural-log LSE.
  __device__ __forceinline__ void finish(float unit) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float sum = l[e];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      const bool seen = sum > 0.f;
      const float inv = seen ? 1.f / sum : 0.f;
      lse[e] = seen ? fmaf(m[e], unit, logf(sum)) : -INFINITY;
#pragma unroll
      for (int mm = 0; mm < MD; ++mm) o[mm][e] *= inv, o[mm][2 + e] *= inv;
    }
  }

  // Merge pass `pass`'s PC 8-column groups of the warp's O rows into sO
  // ([8][LD], the pass's first column at 0) and, in pass 0, the LSEs into sL.
  template <int LD, int PC>
  __device__ __forceinline__ void stage(float* sO, float* sL, int pass, int lane) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mm = 0; mm < MD; ++mm)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = 2 * mm + h;  // the 8-column group
        if (n / PC == pass)
#pragma unroll
          for (int e = 0; e < 2; ++e) sO[(2 * t + e) * LD + 8 * (n - pass * PC) + g] = o[mm][2 * h + e];
      }
    if (pass == 0 && g == 0) sL[2 * t] = lse[0], sL[2 * t + 1] = lse[1];
  }

  // O (normalised, as E) into the warp's 8 rows of a swizzled [rows][D] tile
  // at sO (rows 0-7 there): each 8x8 of O^T transposed back by movmatrix, so
  // a lane stores rows g, columns 2t, 2t+1 of each 8-column group.
  __device__ __forceinline__ void store_o(__half* sO, int lane) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mm = 0; mm < MD; ++mm)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<uint32_t*>(sO + Swizzle<D>::offset(g, 2 * mm + h) + 2 * t) =
            movmatrix_trans(pack2<E>(o[mm][2 * h], o[mm][2 * h + 1]));
  }
};

}  // namespace fa2
