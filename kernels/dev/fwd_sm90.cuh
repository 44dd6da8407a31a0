// fwd_sm90.cuh: CANDIDATE sm_90a forward (issue 13), not shipped: not in
// fa2.cu, the fatbin or the Go table until fwd_check.cu's `sm90a` mode passes on
// an H200 (RESULTS.md says where it stands). First step of the Hopper path:
// the FA2 forward of fwd.cuh with its two GEMMs on wgmma (wgmma.cuh), D 128.
//
// One CTA = one warpgroup (4 warps, 128 threads) = Br 64 query rows (wgmma's
// M); Bc 64 keys per step. Q, and K, V in two stages, sit in shared memory in
// the 128-byte swizzled layout the wgmma descriptors read (5 x 16 KiB), loaded
// by cp.async (16-byte chunks, rows past N zero-filled). Per step n:
//   S = Q K_n^T          8 x wgmma m64n64k16, both operands from shared memory
//   mask, online softmax on the S accumulators (registers: thread t holds rows
//                        16 w + g and + 8, w = t / 32, g = t % 32 / 4, as
//                        mma.sync's C layout), as softmax.cuh does: m, l, O
//                        rescaled by exp2((m_old - m_new) * scale_log2)
//   O += P V_n           4 x wgmma m64n128k16, P (fp16) from the S registers,
//                        V N-major from shared memory
// with the loads of step n + 1 in flight. Each wgmma batch is waited for at
// once (no overlap of softmax and GEMM yet: that is what producer/consumer
// warpgroups and ping-pong scheduling add: fwd_sm90_ws.cuh, the next
// candidate, built on this one's pieces). Causal is bottom-right aligned:
// row i sees keys j <= i + Nk - Nq; rows that see no key get O = 0, L = -inf.
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "../params.cuh"
#include "wgmma.cuh"

namespace sm90 {

struct FwdD128 {
  static constexpr int kArch = 90, kD = 128, kBr = 64, kBc = 64, kWarps = 4, kStages = 2, kSplits = 1;
  static constexpr bool kQRegs = false;
  static constexpr int kTile = 64 * kD * 2;            // bytes of a 64-row tile (Q, K_n or V_n)
  static constexpr int kSmemBytes = (1 + 2 * kStages) * kTile;  // Q + K, V per stage
};

// A 64 x 128 fp16 tile from global rows (row stride rs elements) into the
// swizzled layout; rows >= rows_in are zero-filled (cp.async src-size 0).
__device__ __forceinline__ void load_tile(unsigned char* s, const __half* g, int64_t rs, int rows_in, int t) {
#pragma unroll
  for (int i = t; i < 64 * 16; i += 128) {
    const int r = i / 16, c = (i % 16) * 8;
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(s + swz<64>(r, c)));
    const bool in = r < rows_in;
    const __half* src = in ? g + r * rs + c : g;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

template <bool kCausal>
__global__ void __launch_bounds__(128) fwd_d128(const FwdParams p) {
  using T = FwdD128;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sQ = smem;
  unsigned char* sK = smem + T::kTile;                  // stage st at sK + st * kTile
  unsigned char* sV = smem + (1 + T::kStages) * T::kTile;
  const int t = threadIdx.x, w = t / 32, g = (t % 32) / 4, c2 = 2 * (t % 4);
  // The swizzle is on address bits 4-9, so every tile must start 1024-aligned
  // (the descriptors' base-offset field stays 0): stop loudly if the dynamic
  // shared memory does not.
  if (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) % 1024 != 0) __trap();
  const int m0 = blockIdx.x * T::kBr, b = blockIdx.y / p.hq, h = blockIdx.y % p.hq, hk = h / (p.hq / p.hkv);
  const __half* gQ = static_cast<const __half*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride + m0 * p.q_row_stride;
  const __half* gK = static_cast<const __half*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
  const int shift = p.nk - p.nq;  // causal: row i sees keys <= i + shift
  int n_end = (p.nk + T::kBc - 1) / T::kBc;
  if (kCausal) {
    const int last = m0 + T::kBr - 1 + shift;  // the last key this CTA's rows see
    n_end = last < 0 ? 0 : min(n_end, last / T::kBc + 1);
  }
  auto kv_rows = [&](int n) { return min(T::kBc, p.nk - n * T::kBc); };

  load_tile(sQ, gQ, p.q_row_stride, min(T::kBr, p.nq - m0), t);
  if (n_end > 0) {
    load_tile(sK, gK, p.k_row_stride, kv_rows(0), t);
    load_tile(sV, gV, p.v_row_stride, kv_rows(0), t);
  }
  cp_async_commit();

  float o[64], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  const int row0 = m0 + 16 * w + g;  // and row0 + 8

  for (int n = 0; n < n_end; ++n) {
    const int st = n % T::kStages;
    if (n + 1 < n_end) {  // stage st ^ 1 was released by step n - 1's closing barrier
      load_tile(sK + (st ^ 1) * T::kTile, gK + (n + 1) * T::kBc * p.k_row_stride, p.k_row_stride, kv_rows(n + 1), t);
      load_tile(sV + (st ^ 1) * T::kTile, gV + (n + 1) * T::kBc * p.v_row_stride, p.v_row_stride, kv_rows(n + 1), t);
    }
    cp_async_commit();
    cp_async_wait<1>();  // everything but step n + 1's group: Q and K_n, V_n are in
    fence_proxy_async();
    __syncthreads();

    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kD / 16; ++j) {
      const int off = (j / 4) * (T::kTile / 2) + (j % 4) * 32;  // column block j / 4, k16 step j % 4
      wgmma_m64n64k16_ss(s, desc(sQ + off, 16, 1024), desc(sK + st * T::kTile + off, 16, 1024), j > 0);
    }
    wgmma_commit_wait();

    const int col0 = n * T::kBc;
    const bool masked = col0 + T::kBc > p.nk || (kCausal && col0 + T::kBc - 1 > m0 + shift);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = row0 + 8 * hh;
      float mx = m[hh];
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * hh + e];
          const int col = col0 + 8 * i + c2 + e;
          if (masked && (col >= p.nk || (kCausal && col > row + shift))) x = -INFINITY;
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      // A row with no key seen yet keeps m = -inf: subtract 0 so exp2 gives 0, not NaN.
      const float ms = mx == -INFINITY ? 0.f : mx * p.scale_log2;
      const float alpha = exp2f(m[hh] * p.scale_log2 - ms);
      m[hh] = mx;
      float rs = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * hh + e];
          x = exp2f(x * p.scale_log2 - ms);
          rs += x;
        }
      l[hh] = l[hh] * alpha + rs;  // this thread's columns; the quad's sum at the end
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        o[4 * i + 2 * hh] *= alpha;
        o[4 * i + 2 * hh + 1] *= alpha;
      }
    }

    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kBc / 16; ++j) {  // P's columns 16 j .. 16 j + 15 as wgmma's A fragment
      const uint32_t a[4] = {pack(s[8 * j + 0], s[8 * j + 1]), pack(s[8 * j + 2], s[8 * j + 3]),
                             pack(s[8 * j + 4], s[8 * j + 5]), pack(s[8 * j + 6], s[8 * j + 7])};
      wgmma_m64n128k16_rs(o, a, desc(sV + st * T::kTile + j * 16 * 128, T::kTile / 2, 1024));
    }
    wgmma_commit_wait();
    __syncthreads();  // every warp is done with stage st: step n + 1 refills it
  }
  cp_async_wait<0>();

  __half* gO = static_cast<__half*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
  float* gL = p.lse + (static_cast<int64_t>(b) * p.hq + h) * p.nq;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + 8 * hh;
    float sum = l[hh];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    if (row >= p.nq) continue;
    const bool seen = m[hh] != -INFINITY;
    const float inv = seen ? 1.f / sum : 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      *reinterpret_cast<__half2*>(gO + row * p.o_row_stride + 8 * i + c2) =
          __floats2half2_rn(o[4 * i + 2 * hh] * inv, o[4 * i + 2 * hh + 1] * inv);
    if (t % 4 == 0) gL[row] = seen ? fmaf(m[hh], p.scale, logf(sum)) : -INFINITY;
  }
}

}  // namespace sm90
