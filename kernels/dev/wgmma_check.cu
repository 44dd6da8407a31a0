// wgmma_check.cu: the building block of the sm_90a forward (wgmma.cuh),
// checked on one tile. One warpgroup (128 threads) of one CTA computes, as an
// FA2 iteration does for Br = Bc = 64, D 128:
//   S = Q K^T   wgmma m64n64k16, A = Q and B = K from shared memory (K-major)
//   O = P V     wgmma m64n128k16, A = P = fp16(S) from the S accumulators'
//               registers, B = V from shared memory (N-major: trans-b)
// with Q, K, V in the 128-byte swizzled layout the wgmma matrix descriptors
// name, and compares S and O with a CPU reference. Both readings of the V
// descriptor's two byte offsets are run: the hardware (H200) gives an exact
// O only with "leading" = the 8 KiB stride between 64-wide d blocks and
// "stride" = the 1 KiB stride between 8-row atoms; the other reading is kept
// as a control that must come out wrong (so the check can fail). For K-major
// Q and K the "leading" offset is ignored, as the PTX ISA says: two values.
//
// Layout and descriptor: wgmma.cuh.
//
// Build (H200, nvcc 12+):  nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a kernels/dev/wgmma_check.cu -o wgmma_check
// Here, SASS only:         $(kernels/cuda12.sh) -cubin -arch=sm_90a kernels/dev/wgmma_check.cu
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dev.h"
#include "../wgmma.cuh"

constexpr int kRows = 64;  // Br = Bc
constexpr int kD = 128;
constexpr int kBlock = kRows * 128;  // bytes of one 64-element-wide block

using namespace sm90;

// qk_lead: the K-major "leading" offset (unused by 128B-swizzled K-major
// operands, per the PTX ISA: any value should do). pv_swap: 0 puts the 64-key
// block stride (8 KiB, between d blocks) in "leading" and the 8-row atom stride
// (1 KiB) in "stride"; 1 the other way round.
__global__ void __launch_bounds__(128) wgmma_tile(const __half* q, const __half* k, const __half* v, float* s_out,
                                                  float* o_out, uint32_t qk_lead, int pv_swap) {
  __shared__ __align__(1024) unsigned char qs[2 * kBlock], ks[2 * kBlock], vs[2 * kBlock];
  int t = threadIdx.x;
  for (int i = t; i < kRows * kD; i += 128) {
    int r = i / kD, c = i % kD;
    *reinterpret_cast<__half*>(qs + swz<kRows>(r, c)) = q[i];
    *reinterpret_cast<__half*>(ks + swz<kRows>(r, c)) = k[i];
    *reinterpret_cast<__half*>(vs + swz<kRows>(r, c)) = v[i];
  }
  // Generic-proxy stores must be visible to the async proxy that wgmma reads with.
  fence_proxy_async();
  __syncthreads();

  float s[32];
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  wgmma_fence();
  for (int j = 0; j < kD / 16; ++j) {
    int off = (j / 4) * kBlock + (j % 4) * 32;
    wgmma_m64n64k16_ss<__half>(s, desc(qs + off, qk_lead, 1024), desc(ks + off, qk_lead, 1024), j > 0);
  }
  wgmma_commit_wait();

  // Accumulator layout (as mma.sync's C, per warp a 16-row slice): thread t
  // holds rows 16 w + g and + 8 (w = t / 32, g = t % 32 / 4), columns
  // 8 i + 2 (t % 4) + {0, 1} in s[4 i + {0, 1}] and s[4 i + {2, 3}].
  int w = t / 32, g = (t % 32) / 4, c2 = 2 * (t % 4);
  for (int i = 0; i < 8; ++i)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) s_out[(16 * w + g + 8 * h) * kRows + 8 * i + c2 + e] = s[4 * i + 2 * h + e];

  float o[64];
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  uint32_t lead = pv_swap ? 1024 : kBlock, stride = pv_swap ? kBlock : 1024;
  wgmma_fence();
  for (int j = 0; j < kRows / 16; ++j) {
    // P's k16 slice j as wgmma's A fragment: the S columns 16 j .. 16 j + 15.
    uint32_t a[4] = {pack<__half>(s[8 * j + 0], s[8 * j + 1]), pack<__half>(s[8 * j + 2], s[8 * j + 3]),
                     pack<__half>(s[8 * j + 4], s[8 * j + 5]), pack<__half>(s[8 * j + 6], s[8 * j + 7])};
    wgmma_m64n128k16_rs<__half>(o, a, desc(vs + j * 16 * 128, lead, stride));
  }
  wgmma_commit_wait();
  for (int i = 0; i < 16; ++i)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) o_out[(16 * w + g + 8 * h) * kD + 8 * i + c2 + e] = o[4 * i + 2 * h + e];
}

int main() {
  // Multiples of 1/8 in [-1, 1]: S's fp32 sums are exact, so P = fp16(S) is
  // the same rounding on both sides and O differs only by summation order.
  std::vector<__half> q(kRows * kD), k(kRows * kD), v(kRows * kD);
  std::vector<float> qf(q.size()), kf(k.size()), vf(v.size());
  srand(1);
  for (size_t i = 0; i < q.size(); ++i) {
    qf[i] = (rand() % 17 - 8) / 8.f;
    kf[i] = (rand() % 17 - 8) / 8.f;
    vf[i] = (rand() % 17 - 8) / 8.f;
    q[i] = __float2half(qf[i]);
    k[i] = __float2half(kf[i]);
    v[i] = __float2half(vf[i]);
  }
  std::vector<float> s_ref(kRows * kRows), o_ref(kRows * kD, 0.f);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kRows; ++c) {
      float a = 0;
      for (int x = 0; x < kD; ++x) a += qf[r * kD + x] * kf[c * kD + x];
      s_ref[r * kRows + c] = a;
    }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kRows; ++c) {
      float p = __half2float(__float2half(s_ref[r * kRows + c]));
      for (int x = 0; x < kD; ++x) o_ref[r * kD + x] += p * vf[c * kD + x];
    }
  __half *dq, *dk, *dv;
  float *ds, *dout;
  CK(cudaMalloc(&dq, q.size() * 2));
  CK(cudaMalloc(&dk, k.size() * 2));
  CK(cudaMalloc(&dv, v.size() * 2));
  CK(cudaMalloc(&ds, s_ref.size() * 4));
  CK(cudaMalloc(&dout, o_ref.size() * 4));
  CK(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  int fails = 0;
  for (uint32_t qk_lead : {16u, 8192u})
    for (int pv_swap = 0; pv_swap < 2; ++pv_swap) {
      std::vector<float> s(s_ref.size()), o(o_ref.size());
      CK(cudaMemset(ds, 0, s.size() * 4));
      CK(cudaMemset(dout, 0, o.size() * 4));
      wgmma_tile<<<1, 128>>>(dq, dk, dv, ds, dout, qk_lead, pv_swap);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost));
      double es = 0, eo = 0, mo = 0;
      for (size_t i = 0; i < s.size(); ++i) es = fmax(es, fabs(s[i] - s_ref[i]));
      for (size_t i = 0; i < o.size(); ++i) eo = fmax(eo, fabs(o[i] - o_ref[i])), mo = fmax(mo, fabs(o_ref[i]));
      // S is exact; O's only error is fp32 summation order over 64 terms.
      bool ok_s = es == 0, ok_o = eo <= 1e-5 * mo;
      std::printf("qk lead %5u pv %-22s  S max|err| %.3g %s   O max|err| %.3g (max|O| %.3g) %s\n", qk_lead,
                  pv_swap ? "lead 1K, stride 8K" : "lead 8K, stride 1K", es, ok_s ? "ok" : "WRONG", eo, mo,
                  ok_o ? "ok" : "WRONG");
      fails += !ok_s + (pv_swap ? ok_o : !ok_o);
    }
  std::printf("%s\n", fails ? "FAIL" : "ok: S exact, O exact with V's lead = 8 KiB, stride = 1 KiB (the swapped control wrong)");
  return fails ? 1 : 0;
}
