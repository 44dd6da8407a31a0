// fwd_sm90_ws.cuh: the second sm_90a forward candidate (issue 13), not shipped:
// FA3's structure on fwd_sm90.cuh's checked pieces (wgmma.cuh), D 128.
//
// One CTA = three warpgroups (384 threads), Br 128, Bc 128:
//   warpgroup 0, the producer: one thread issues every load as a TMA bulk tensor
//     copy (cp.async.bulk.tensor, CUtensorMaps made by ws_args on the host) into
//     the 128-byte swizzled layout the wgmma descriptors read: Q once, then
//     K_n and V_n into kStages stages. Each stage has a "full" mbarrier per
//     tensor (the producer's expect_tx, completed by the copy's bytes) and an
//     "empty" one (every consumer thread arrives once it no longer reads it).
//     Rows past Nq / Nk come zero-filled by TMA. It gives its registers away
//     (setmaxnreg.dec 24) and needs none of its other 127 threads.
//   warpgroups 1 and 2, the consumers: 64 query rows each (wgmma's M), 240
//     registers each thread (setmaxnreg.inc). Per step n, intra-warpgroup
//     overlap as FA3's: issue S_n = Q K_n^T, issue O += P_{n-1} V_{n-1}, wait
//     for S_n only, mask and online softmax on S_n (m, l) while the P V GEMM
//     runs, then wait for it, rescale O by exp2((m_old - m_new) * scale_log2)
//     and pack P_n as the next P V's A fragments (registers, as fwd_sm90.cuh).
//     kPingPong orders the two consumers' GEMM issues with two named
//     barriers (FA3's warp-scheduler barriers): consumer c issues its batch
//     after bar.sync kTurn + c, then bar.arrive kTurn + 1 - c, so the tensor
//     cores run one consumer's GEMMs while the other does its softmax. Without
//     it the two interleave as the warp schedulers find them.
// Causal is bottom-right aligned: row i sees keys j <= i + Nk - Nq; rows that
// see no key get O = 0, L = -inf.
// Checked (fwd_check.cu `sm90a`, compute-sanitizer clean) and timed on the H200:
// RESULTS.md, Hopper session 6 (0.80-0.88x SDPA cuDNN non-causal; ptxas still
// waits for P V before the softmax's exp2, so the overlap is partial).
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>

#include "../params.cuh"
#include "wgmma.cuh"

namespace sm90 {

struct FwdWsD128 {
  static constexpr int kArch = 90, kD = 128, kBr = 128, kBc = 128, kWarps = 12, kStages = 2, kSplits = 1;
  static constexpr bool kQRegs = false;
  static constexpr int kConsumers = kBr / 64;              // warpgroups of 64 rows
  static constexpr int kQTile = 64 * kD * 2;               // one consumer's Q rows (bytes)
  static constexpr int kKVTile = kBc * kD * 2;             // K_n or V_n
  static constexpr int kBox = 64;                          // TMA box columns: one 128-byte swizzle row
  static constexpr int kBarOff = kConsumers * kQTile + 2 * kStages * kKVTile;
  static constexpr int kBars = 1 + 4 * kStages;            // Q full; K, V full and empty per stage
  static constexpr int kSmemBytes = kBarOff + 8 * kBars;
  static constexpr int kConsumerThreads = 128 * kConsumers;  // an empty barrier's arrivals
  static constexpr int kTurn = 1;  // named barriers kTurn, kTurn + 1: the consumers' turns (0 is __syncthreads)
};

// The kernel's one parameter: tensor maps in param space (__grid_constant__),
// as TMA reads them; 64-byte aligned as CUtensorMap must be.
struct alignas(64) WsArgs {
  CUtensorMap q, k, v;
  FwdParams p;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
// Until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(smem_u32(b)),
      "r"(parity)
      : "memory");
}
// One box (kBox columns x box rows) at coordinates (column, row, head, batch).
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2,
                                         int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <bool kCausal, bool kPingPong>
__global__ void __launch_bounds__(384, 1) fwd_ws_d128(const __grid_constant__ WsArgs a) {
  using T = FwdWsD128;
  const FwdParams& p = a.p;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sQ = smem;                                // consumer c's rows at sQ + c * kQTile
  unsigned char* sK = smem + T::kConsumers * T::kQTile;   // stage st at sK + st * kKVTile
  unsigned char* sV = sK + T::kStages * T::kKVTile;
  uint64_t* fullQ = reinterpret_cast<uint64_t*>(smem + T::kBarOff);
  uint64_t* fullK = fullQ + 1;
  uint64_t* fullV = fullK + T::kStages;
  uint64_t* emptyK = fullV + T::kStages;
  uint64_t* emptyV = emptyK + T::kStages;
  const int t = threadIdx.x, wg = t / 128;
  // The swizzle is on address bits 4-9: every tile must start 1024-aligned.
  if (smem_u32(smem) % 1024 != 0) __trap();
  const int m0 = blockIdx.x * T::kBr, b = blockIdx.y / p.hq, h = blockIdx.y % p.hq, hk = h / (p.hq / p.hkv);
  const int shift = p.nk - p.nq;  // causal: row i sees keys <= i + shift
  int n_end = (p.nk + T::kBc - 1) / T::kBc;
  if (kCausal) {
    const int last = m0 + T::kBr - 1 + shift;  // the last key this CTA's rows see
    n_end = last < 0 ? 0 : min(n_end, last / T::kBc + 1);
  }
  if (t == 0) {
    mbar_init(fullQ, 1);
    for (int st = 0; st < T::kStages; ++st) {
      mbar_init(fullK + st, 1);
      mbar_init(fullV + st, 1);
      mbar_init(emptyK + st, T::kConsumerThreads);
      mbar_init(emptyV + st, T::kConsumerThreads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (t != 0 || n_end == 0) return;
    mbar_expect_tx(fullQ, T::kConsumers * T::kQTile);
    for (int c = 0; c < T::kConsumers; ++c)
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sQ + c * T::kQTile + x * (T::kQTile / 2), &a.q, fullQ, x * T::kBox, m0 + 64 * c, h, b);
    for (int n = 0; n < n_end; ++n) {
      const int st = n % T::kStages;
      const uint32_t ph = (n / T::kStages) & 1;  // the stage's use number n / kStages; its release was use - 1
      if (n >= T::kStages) mbar_wait(emptyK + st, ph ^ 1);
      mbar_expect_tx(fullK + st, T::kKVTile);
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sK + st * T::kKVTile + x * (T::kKVTile / 2), &a.k, fullK + st, x * T::kBox, n * T::kBc, hk, b);
      if (n >= T::kStages) mbar_wait(emptyV + st, ph ^ 1);
      mbar_expect_tx(fullV + st, T::kKVTile);
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sV + st * T::kKVTile + x * (T::kKVTile / 2), &a.v, fullV + st, x * T::kBox, n * T::kBc, hk, b);
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int c = wg - 1, tc = t - 128 * wg, w = tc / 32, g = (tc % 32) / 4, c2 = 2 * (tc % 4);
  const unsigned char* q = sQ + c * T::kQTile;
  const int rowc = m0 + 64 * c;          // this consumer's first row
  const int row0 = rowc + 16 * w + g;    // this thread's rows: row0 and row0 + 8
  float o[64], s[64], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  uint32_t pf[32];  // P (fp16 pairs) of the step whose P V is next: wgmma's A fragments
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  // Ping-pong turns: one per GEMM issue point (n_end + 1 of them in each
  // consumer). Consumer 1 opens consumer 0's first turn and does not hand over
  // after its last, so each barrier sees as many arrivals as syncs.
  int turn = 0;
  auto turn_begin = [&]() {
    if (kPingPong) named_sync(T::kTurn + c, T::kConsumerThreads);
  };
  auto turn_end = [&]() {
    if (kPingPong && (c == 0 || turn < n_end)) named_arrive(T::kTurn + 1 - c, T::kConsumerThreads);
    ++turn;
  };
  if (kPingPong && c == 1 && n_end > 0) named_arrive(T::kTurn, T::kConsumerThreads);

  auto s_gemm = [&](int n) {  // issue S = Q K_n^T; not waited for
    const unsigned char* k = sK + (n % T::kStages) * T::kKVTile;
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kD / 16; ++j)  // column block j / 4, k16 step j % 4
      wgmma_m64n128k16_ss(s, desc(q + (j / 4) * (T::kQTile / 2) + (j % 4) * 32, 16, 1024),
                          desc(k + (j / 4) * (T::kKVTile / 2) + (j % 4) * 32, 16, 1024), j > 0);
    wgmma_commit();
    fence_regs(s);
  };
  auto pv_gemm = [&](int n) {  // issue O += P V_n; not waited for
    const unsigned char* v = sV + (n % T::kStages) * T::kKVTile;
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kBc / 16; ++j) {  // keys 16 j .. 16 j + 15
      const uint32_t af[4] = {pf[4 * j], pf[4 * j + 1], pf[4 * j + 2], pf[4 * j + 3]};
      wgmma_m64n128k16_rs(o, af, desc(v + j * 16 * 128, T::kKVTile / 2, 1024));
    }
    wgmma_commit();
    fence_regs(o);
  };
  // Mask and online softmax on S_n in place (s becomes unnormalised P_n); m, l
  // updated, alpha the factor O still owes.
  auto softmax = [&](int n) {
    const int col0 = n * T::kBc;
    const bool masked = col0 + T::kBc > p.nk || (kCausal && col0 + T::kBc - 1 > rowc + shift);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = row0 + 8 * hh;
      float mx = m[hh];
#pragma unroll
      for (int i = 0; i < T::kBc / 8; ++i)
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
      alpha[hh] = exp2f(m[hh] * p.scale_log2 - ms);
      m[hh] = mx;
      float rs = 0.f;
#pragma unroll
      for (int i = 0; i < T::kBc / 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * hh + e];
          x = exp2f(x * p.scale_log2 - ms);
          rs += x;
        }
      l[hh] = l[hh] * alpha[hh] + rs;  // this thread's columns; the quad's sum at the end
    }
  };
  auto rescale_pack = [&]() {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o[4 * i] *= alpha[0];
      o[4 * i + 1] *= alpha[0];
      o[4 * i + 2] *= alpha[1];
      o[4 * i + 3] *= alpha[1];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) pf[i] = pack(s[2 * i], s[2 * i + 1]);
  };

  if (n_end > 0) {
    mbar_wait(fullQ, 0);
    mbar_wait(fullK, 0);
    turn_begin();
    s_gemm(0);
    turn_end();
    wgmma_wait<0>();
    fence_regs(s);
    mbar_arrive(emptyK);
    softmax(0);
    rescale_pack();
    for (int n = 1; n < n_end; ++n) {
      const int st = n % T::kStages, sp = (n - 1) % T::kStages;
      mbar_wait(fullK + st, (n / T::kStages) & 1);
      mbar_wait(fullV + sp, ((n - 1) / T::kStages) & 1);
      turn_begin();
      s_gemm(n);
      pv_gemm(n - 1);
      turn_end();
      wgmma_wait<1>();  // S_n is in; P_{n-1} V_{n-1} may still run
      fence_regs(s);
      mbar_arrive(emptyK + st);
      softmax(n);
      fence_regs(s);  // the softmax above the wait in the PTX; ptxas still hoists the
      fence_regs(alpha);  // wait into the masking (RESULTS.md): the overlap to win back
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(pf);  // P_{n-1} stays live up to here: the softmax must not take its registers
      mbar_arrive(emptyV + sp);
      rescale_pack();
    }
    const int nl = n_end - 1;
    mbar_wait(fullV + nl % T::kStages, (nl / T::kStages) & 1);
    turn_begin();
    pv_gemm(nl);
    turn_end();
    wgmma_wait<0>();
    fence_regs(o);
  }

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
    if (tc % 4 == 0) gL[row] = seen ? fmaf(m[hh], p.scale, logf(sum)) : -INFINITY;
  }
}

// Host: the kernel's argument for FwdParams p: Q, K, V as 4-d tensor maps
// (d, row, head, batch; the strides p gives, so BSHD and BHSD alike), boxes of
// kBox columns x 64 (Q) or kBc (K, V) rows, 128-byte swizzle, out-of-bounds
// rows zero. cuTensorMapEncodeTiled is taken from libcuda by dlsym, as dev.h
// does the rest of the driver API.
inline CUresult ws_args(const FwdParams& p, WsArgs* out) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    return lib ? reinterpret_cast<Encode>(dlsym(lib, "cuTensorMapEncodeTiled")) : nullptr;
  }();
  if (!encode) return CUDA_ERROR_NOT_FOUND;
  using T = FwdWsD128;
  auto map = [&](CUtensorMap* m, const void* base, int rows, int heads, int64_t rs, int64_t hs, int64_t bs,
                 int box_rows) {
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.d), static_cast<cuuint64_t>(rows),
                                static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(p.b)};
    const cuuint64_t strides[3] = {static_cast<cuuint64_t>(rs * 2), static_cast<cuuint64_t>(hs * 2),
                                   static_cast<cuuint64_t>(bs * 2)};
    const cuuint32_t box[4] = {T::kBox, static_cast<cuuint32_t>(box_rows), 1, 1}, unit[4] = {1, 1, 1, 1};
    return encode(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(base), dims, strides, box, unit,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  out->p = p;
  CUresult r = map(&out->q, p.q, p.nq, p.hq, p.q_row_stride, p.q_head_stride, p.q_batch_stride, 64);
  if (r == CUDA_SUCCESS) r = map(&out->k, p.k, p.nk, p.hkv, p.k_row_stride, p.k_head_stride, p.k_batch_stride, T::kBc);
  if (r == CUDA_SUCCESS) r = map(&out->v, p.v, p.nk, p.hkv, p.v_row_stride, p.v_head_stride, p.v_batch_stride, T::kBc);
  return r;
}

}  // namespace sm90
