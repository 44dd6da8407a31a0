// mask.cuh: which keys a query row sees, and which K/V blocks a CTA must visit.
//
// Causal is aligned bottom-right (as FA2 >= 2.1): key j is visible to query row i
// iff j <= i + Nk - Nq. With Nq > Nk the first Nq - Nk rows see no key at all;
// their O is 0 and their LSE -inf. Keys j >= Nk (the ragged last block, read as
// zeros) are never visible.
#pragma once
#include <cmath>

namespace fa2 {

// Key blocks [0, n_end) hold every key some row of [m0, m0+Br) ∩ [0, Nq) sees;
// blocks from n_mask on need the per-element mask (the ragged edge, or under
// causal the blocks crossing the diagonal of the CTA's first row).
struct KeyBlocks {
  int n_end;
  int n_mask;
};

template <int Br, int Bc, bool Causal>
__device__ __forceinline__ KeyBlocks key_blocks(int m0, int nq, int nk) {
  const int tc = (nk + Bc - 1) / Bc;
  KeyBlocks r{tc, nk / Bc};  // a full last block needs no mask without causal
  if (Causal) {
    const int last_row = min(m0 + Br, nq) - 1;
    const int last_key = last_row + nk - nq;  // highest key any row here sees
    r.n_end = last_key < 0 ? 0 : min(tc, last_key / Bc + 1);
    // Block n is unmasked iff its last key n*Bc+Bc-1 <= m0 + nk - nq (first row's limit).
    const int first_lim = m0 + nk - nq;
    const int full = first_lim + 1 < 0 ? 0 : (first_lim + 1) / Bc;  // blocks entirely at or below it
    r.n_mask = min(r.n_mask, full);
  }
  return r;
}

// Set to -inf the scores the rows may not see. s[i][j][*] is the accumulator of
// m-tile i, key n-tile j (8 keys); row0 is the warp's first query row, col0 the
// block's first key. Lane (g, t) holds rows row0+16i+g(+8), keys col0+8j+2t(+1).
template <int MT, int NT, bool Causal>
__device__ __forceinline__ void apply_mask(float (&s)[MT][NT][4], int row0, int col0, int lane, int nq, int nk) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int row = row0 + 16 * i + g + 8 * hr;
      int lim = nk - 1 - col0;  // highest visible key, relative to col0
      if (Causal) lim = min(lim, row + nk - nq - col0);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (8 * j + 2 * t + e > lim) s[i][j][2 * hr + e] = -INFINITY;
        }
      }
    }
  }
}

// Backward, dK/dV kernel: the CTA owns keys [n0, n0+Bc) and walks query blocks
// of Br rows. Under causal, row i sees key n0 iff i >= n0 - (Nk - Nq), so blocks
// before query_begin see none of the CTA's keys (the result may be >= Tr: then
// no query sees them and dK = dV = 0).
template <int Br, bool Causal>
__device__ __forceinline__ int query_begin(int n0, int nq, int nk) {
  if (!Causal) return 0;
  const int first = n0 - (nk - nq);
  return first <= 0 ? 0 : first / Br;
}

// Whether query block [m0, m0+Br) needs the element mask against keys
// [n0, n0+Bc): its first row has the lowest limit m0 + Nk - Nq. Queries past Nq
// need none (their L is +inf, so P = 0), nor keys past Nk (never stored).
template <int Bc>
__device__ __forceinline__ bool crosses_diagonal(int m0, int n0, int nq, int nk) {
  return n0 + Bc - 1 > m0 + nk - nq;
}

// The causal mask on the transposed scores S^T (rows keys, columns queries):
// lane (g, t) of s[i][j][*] holds keys key0+16i+g(+8), queries q0+8j+2t(+1).
template <int MT, int NT>
__device__ __forceinline__ void apply_mask_t(float (&s)[MT][NT][4], int key0, int q0, int lane, int nq, int nk) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      // Key k is visible to query q iff q >= k - (Nk - Nq): columns below lo are masked.
      const int lo = key0 + 16 * i + g + 8 * hr - (nk - nq) - q0 - 2 * t;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (8 * j + e < lo) s[i][j][2 * hr + e] = -INFINITY;
        }
      }
    }
  }
}

}  // namespace fa2
