// common.cuh: what every rung of the kernel ladder shares (tutorial chapter 6).
// The rungs take the shipped kernels' FwdParams and launch contract: grid
// (ceil(Nq/Br), B*Hq), one CTA per block of Br query rows of one (batch, head).
#pragma once
#include <cuda_fp16.h>
#include "../params.cuh"

namespace fa2 {
namespace ladder {

constexpr float kLn2 = 0.6931471805599453f;

// The CTA's tensors: q, o and lse start at its first query row m0; k and v at
// key 0 of the kv head its query head reads (GQA: Hq/Hkv query heads share one).
struct Cta {
  const __half *q, *k, *v;
  __half* o;
  float* lse;
  int m0;
  __device__ __forceinline__ Cta(const FwdParams& p, int Br) {
    const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq, hk = h / (p.hq / p.hkv);
    m0 = blockIdx.x * Br;
    q = static_cast<const __half*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride + m0 * p.q_row_stride;
    k = static_cast<const __half*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
    v = static_cast<const __half*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
    o = static_cast<__half*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride + m0 * p.o_row_stride;
    lse = p.lse + (static_cast<int64_t>(b) * p.hq + h) * p.nq + m0;
  }
};

// Keys [0, key_end) are visible to query row i: all of them, or under causal
// (aligned bottom-right) those with j <= i + Nk - Nq; 0 when the row sees none.
template <bool kCausal>
__device__ __forceinline__ int key_end(int i, int nq, int nk) {
  return kCausal ? max(0, min(nk, i + nk - nq + 1)) : nk;
}

// ROWS x D fp16 rows from global memory (row stride ld elements) into a
// row-major shared tile, 16 bytes per thread per step; rows >= valid become 0
// (a key past Nk must be 0 in V: its P is 0, but 0 * garbage may be NaN).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void copy_rows(__half* s, const __half* g, int64_t ld, int valid, int tid) {
  constexpr int C = D / 8;
  for (int x = tid; x < ROWS * C; x += NT) {
    const int row = x / C, ch = x % C;
    reinterpret_cast<uint4*>(s)[x] =
        row < valid ? *reinterpret_cast<const uint4*>(g + row * ld + 8 * ch) : make_uint4(0, 0, 0, 0);
  }
}

}  // namespace ladder
}  // namespace fa2
