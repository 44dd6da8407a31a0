// mask.cuh: which keys a query row sees, and which K/V blocks a CTA must visit.
//
// Causal is aligned bottom-right (as FA2 >= 2.1): key j is visible to query row i
// iff j <= i + Nk - Nq. With Nq > Nk the first Nq - Nk rows see no key at all;
// their O is 0 and their LSE -inf. Keys j >= Nk (the ragged last block, read as
// zeros) are never visible.
#pragma once
#include <cmath>
#include <type_traits>
#include "params.cuh"

namespace fa2 {

constexpr float kLog2e = 1.4426950408889634f;

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

// The modified forward (fwd_kernel<..., kMod>): a sliding window, softcap and
// ALiBi, read from FwdParams at run time. Row i sees key j iff
// i+off-left <= j <= i+off+right (off = Nk - Nq, a bound of -1 leaving that
// side open; causal is right = 0), and the score of a visible key is
// x = scale*q.k, capped to c*tanh(x/c), minus slope_h*|i+off-j|: the CPU
// reference's definition (problem.mask), so the LSE is that of the |distance|
// form, not FA2's causal slope*j (equal only up to a per-row constant).
struct WindowBlocks {
  int n_begin, n_end;   // key blocks [n_begin, n_end) hold every key a row of the CTA sees
  int n_full, n_mask;   // blocks [n_full, n_mask) are visible to every row: no element mask
};

// Row i's visible keys are [lo(i), hi(i)], both growing with i; rows
// [first, last] see keys [lo(first), hi(last)], and a block needs no mask iff
// it lies within [lo(last), hi(first)].
template <int Bc>
__device__ __forceinline__ WindowBlocks window_blocks_rows(int first, int last, int nq, int nk, int left, int right) {
  const int off = nk - nq;
  auto lo = [&](int i) { return left < 0 ? 0 : max(0, i + off - left); };
  auto hi = [&](int i) { return right < 0 ? nk - 1 : min(nk - 1, i + off + right); };
  WindowBlocks r;
  r.n_begin = lo(first) / Bc;
  r.n_end = hi(last) < lo(first) ? r.n_begin : hi(last) / Bc + 1;  // empty: no row sees a key
  r.n_full = (lo(last) + Bc - 1) / Bc;
  r.n_mask = hi(first) + 1 <= 0 ? 0 : (hi(first) + 1) / Bc;
  return r;
}

// The CTA of the forward owns rows [m0, min(m0+Br, Nq)).
template <int Br, int Bc>
__device__ __forceinline__ WindowBlocks window_blocks(int m0, int nq, int nk, int left, int right) {
  return window_blocks_rows<Bc>(m0, min(m0 + Br, nq) - 1, nq, nk, left, right);
}

// The key blocks [n_begin, n_end) in order, step(n, tag) for each; tag is a
// std::integral_constant<int, M>: M 1 for a block outside [n_full, n_mask)
// (not wholly inside every row's window: it needs the mask), 0 for one inside,
// -1 where the step decides at run time. kPeel walks them as FA2 walks masked
// and unmasked steps: a masked block one step at a time, the run of clean
// blocks in a loop of its own whose body holds no mask code. Peeled, the D64
// modified kernels cost 0.96-0.98x (window only) and 1.10x (softcap) the
// plain one's time at N 8192 on the H200; with both in one loop body, 1.05x
// and 1.30x.
template <bool kPeel, class Step>
__device__ __forceinline__ void walk_blocks(int n_begin, int n_end, int n_full, int n_mask, Step&& step) {
  if constexpr (kPeel) {
    const int clean_end = min(n_mask, n_end);
    for (int n = n_begin; n < n_end;) {
      if (n < n_full || n >= n_mask) {
        step(n++, std::integral_constant<int, 1>{});
      } else {
        for (; n < clean_end; ++n) step(n, std::integral_constant<int, 0>{});
      }
    }
  } else {
    for (int n = n_begin; n < n_end; ++n) step(n, std::integral_constant<int, -1>{});
  }
}

// The modified kernels' template flag (fwd_kernel's kMod): kModOn for every
// one, plus which score modifiers are compiled in, one kernel each
// (fa2_fwd_*_mod, _mod_cap, _mod_alibi, _mod_cap_alibi; the window is a
// parameter of all), so each score runs straight-line code: with run-time
// tests per score (and tanhf's long sequence) a _mod kernel cost 1.4-3.4x the
// plain forward (H200).
enum : int { kModOn = 1, kModCap = 2, kModALiBi = 4 };
// The Hopper kernels whose ALiBi column term comes out of S's GEMM
// (fwd_sm90.cuh's kSide): ALiBi without the softcap, whose tanh would
// come between the GEMM and the bias.
__host__ __device__ constexpr bool sm90_alibi_gemm(int mod) { return (mod & kModALiBi) && !(mod & kModCap); }

__device__ __forceinline__ float tanh_approx(float x) {  // MUFU.TANH (sm_75+): relative error <= 2^-11
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ScoreMods turns the raw scores q.k of one key block into the scores the
// softmax sees, in units of `unit` (the softmax runs with scale unit, exp2 by
// unit*log2(e), and L = m*unit + ln l): without a softcap unit = scale and a
// score is q.k itself, as in the plain kernel (no extra op); with one unit = c
// and a score is tanh(scale*q.k/c). ALiBi subtracts slope/unit*|i+off-j|.
struct ScoreMods {
  float unit, unit_log2;  // true score = unit * s
  float cap_in;           // scale / c (softcap only)
  float alibi;            // slope_h / unit, 0: none
  int off, nk, left, right;

  // Head h of a problem of nq queries and nk keys (a varlen call's sequence).
  template <class Params>  // FwdParams, or BwdParams (the modified backward)
  __device__ __forceinline__ static ScoreMods of(const Params& p, int h, int nq, int nk) {
    const float unit = p.softcap > 0.f ? p.softcap : p.scale;
    return ScoreMods{unit, unit * kLog2e, p.softcap > 0.f ? p.scale / p.softcap : 0.f,
                     p.alibi_slopes ? p.alibi_slopes[h] / unit : 0.f, nk - nq, nk, p.window_left, p.window_right};
  }

  // The same modifiers on a problem of nq queries and nk keys (a packed sequence).
  __device__ __forceinline__ ScoreMods with_lengths(int nq, int nk_) const {
    ScoreMods r = *this;
    r.off = nk_ - nq;
    r.nk = nk_;
    return r;
  }

  // s[i][j][*] as apply_mask's; kMask: also set to -inf the keys outside the
  // window (and past Nk). kCap, kALiBi: kModCap, kModALiBi of the instantiation.
  //
  // The softcap's tanh is the hardware tanh.approx.f32 (sm_75+, one MUFU op,
  // relative error <= 2^-11), as FA2 does, not tanhf (~20 instructions). That
  // error is fp16's unit roundoff: attntest's FP16/BF16 baselines round the
  // tanh to the input precision, as FA2's reference in the input dtype
  // (attention_ref without upcast) does, so the 2x-baseline rule holds it.
  template <int MT, int NT, bool kMask, bool kCap, bool kALiBi>
  __device__ __forceinline__ void apply(float (&s)[MT][NT][4], int row0, int col0, int lane) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = row0 + 16 * i + g + 8 * hr;
        const float dist0 = float(row + off - col0 - 2 * t);  // i+off-j of this lane's first key
        int lo = 0, hi = nk - 1 - col0;  // visible keys, relative to col0
        if (kMask) {
          if (left >= 0) lo = row + off - left - col0;
          if (right >= 0) hi = min(hi, row + off + right - col0);
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[i][j][2 * hr + e];
            float v = kCap ? tanh_approx(x * cap_in) : x;
            if (kALiBi) v = fmaf(-alibi, fabsf(dist0 - float(8 * j + e)), v);
            if (kMask) {
              const int k = 8 * j + 2 * t + e;
              if (k < lo || k > hi) v = -INFINITY;
            }
            x = v;
          }
        }
      }
    }
  }

  // ALiBi on a key block wholly on one side of the diagonal. With P = m0+off
  // (the CTA's first row's diagonal key) and R(i) = alibi*(i-m0),
  // -alibi*|i+off-j| is -R(i) + alibi*(j-P) below the diagonal (j <= i+off) and
  // +R(i) - alibi*(j-P) above it: a per-row constant, which the softmax may
  // carry in m, plus a column term that each lane computes once per block. The
  // softmax thus sees v + side*R(i) = s + side*alibi*(j-P) (side +1 below, -1
  // above, 0: the |distance| form of apply), one FADD per score instead of
  // FADD + FFMA; shift_side moves m between the forms where the side changes.
  // Relative to P the terms stay within alibi*(Br+Bc) of 0 on the blocks that
  // carry the softmax's mass, so no precision is lost to large offsets.
  //
  // The side of the keys [col0, col0+Bs) for the CTA's rows [m0, last]: +1 if
  // every one is at or below each row's diagonal, -1 if at or above, else 0.
  template <int Bs>
  __device__ __forceinline__ int alibi_side(int m0, int last, int col0) const {
    return col0 + Bs - 1 <= m0 + off ? 1 : col0 >= last + off ? -1 : 0;
  }

  template <int MT, int NT, bool kCap>
  __device__ __forceinline__ void apply_side(float (&s)[MT][NT][4], int side, int m0, int col0, int lane) const {
    const int t = lane & 3;
    const float a = side > 0 ? alibi : -alibi;
    const float b0 = a * float(col0 + 2 * t - m0 - off);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float b = fmaf(a, float(8 * j + e), b0);  // side*alibi*(j-P) of this key: one per column, not per score
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            float& x = s[i][j][2 * hr + e];
            x = (kCap ? tanh_approx(x * cap_in) : x) + b;
          }
      }
  }

  // Moves the softmax's running max m (rows wrow+16i+g(+8) of the CTA, which
  // starts at m0) from side `from`'s form to side `to`'s: l and O are relative
  // to m, so they stay as they are.
  template <int MT>
  __device__ __forceinline__ void shift_side(float (&m)[MT][2], int from, int to, int wrow, int lane) const {
    const float d = float(to - from) * alibi;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) m[i][hr] = fmaf(d, float(wrow + 16 * i + (lane >> 2) + 8 * hr), m[i][hr]);
  }
};

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

// Backward under a window (the kMod kernels): the query blocks [begin, end)
// whose rows' windows show a key of [n0, n0+Bc): row i sees key j iff
// i+off-left <= j <= i+off+right (WindowBlocks above), so rows
// [n0-off-right, n0+Bc-1-off+left] ∩ [0, Nq). It is the transpose of
// window_blocks: key block n visits query block i here iff n is in i's
// [n_begin, n_end) there (the ordered twin's counters rely on it).
struct BlockRange {  // blocks [begin, end)
  int begin, end;
};
template <int Br, int Bc>
__device__ __forceinline__ BlockRange window_query_blocks(int n0, int nq, int nk, int left, int right) {
  const int off = nk - nq;
  const int lo = right < 0 ? 0 : max(0, n0 - off - right);
  const int hi = left < 0 ? nq - 1 : min(nq - 1, n0 + Bc - 1 - off + left);
  BlockRange r;
  r.begin = lo / Br;
  r.end = hi < lo ? r.begin : hi / Br + 1;
  return r;
}

// The query blocks [begin, end) of the Tr = ceil(Nq/Br) that a dK/dV CTA
// owning keys [n0, n0+Bc) walks (bwd.cuh's and bwd_kv.cuh's): those whose
// rows see one of its keys, from query_begin under causal, window_query_blocks
// under a window (kMod).
template <int Br, int Bc, bool kCausal, bool kMod>
__device__ __forceinline__ BlockRange key_block_queries(int n0, int nq, int nk, int tr, int left, int right) {
  if constexpr (kMod) return window_query_blocks<Br, Bc>(n0, nq, nk, left, right);
  else return BlockRange{min(query_begin<Br, kCausal>(n0, nq, nk), tr), tr};
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
