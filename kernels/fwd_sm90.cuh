// fwd_sm90.cuh: the Hopper forward (sm_90a; issue 13): FA3's structure, warp
// specialisation with TMA loads and wgmma, on the tile of traits.cuh's Tile90.
//
// One CTA = one producer warpgroup and T::kConsumers consumer warpgroups; the
// CTA owns Br = 64 x kConsumers query rows of one (batch, head) and walks the
// Tc = ceil(Nk/Bc) key blocks (causal: up to the last its rows see).
//   producer: gives its registers away (setmaxnreg), then one thread issues
//     every load as a TMA bulk tensor copy (tensor maps in the kernel's
//     parameter, Sm90FwdArgs, made by the host) into the 128-byte swizzled
//     layout the wgmma descriptors read: Q once, then K_n and V_n into kStages
//     stages. Per stage and tensor a "full" mbarrier (the producer's expect_tx,
//     completed by the copy's bytes) and an "empty" one (every consumer thread
//     arrives once it no longer reads the tile), so K_n is refilled as soon
//     as S_n is done and V_n after its P V. Rows past Nq / Nk come zero-filled.
//   consumers: 64 query rows each (wgmma's M). Per step n, FA3's
//     intra-warpgroup overlap: issue S_n = Q K_n^T, rescale O by P_{n-1}'s
//     exp2((m_old - m_new) * scale_log2), issue O += P_{n-1} V_{n-1}, wait for
//     S_n only, mask and online softmax on S_n (m, l) while the P V GEMM runs
//     (pinned there: pin_before_wait), then wait for it and pack P_n (fp16) as
//     the next P V's A operand in registers (the accumulator layout per warp is
//     mma.sync's C layout, so FA2's S -> P register reuse carries over). Steps
//     whose block needs no mask for any of the consumer's rows run without
//     the mask code.
// Causal is bottom-right aligned: row i sees keys j <= i + Nk - Nq; rows that
// see no key get O = 0, L = -inf. Causal CTAs start with the heaviest query
// blocks (the last ones) so that the light ones fill the tail.
//
// Not here (the host runs those calls on the sm_80 path): varlen, a window,
// softcap, ALiBi, bf16. Measured on the H200: kernels/dev/RESULTS.md (Hopper).
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "params.cuh"
#include "tma.cuh"
#include "traits.cuh"
#include "wgmma.cuh"

namespace sm90 {

template <class T, bool kCausal>
__device__ __forceinline__ void fwd_kernel(const Sm90FwdArgs& a) {
  constexpr int kQBlock = 64 * 128;      // bytes of one 64-column block of a consumer's Q
  constexpr int kKVBlock = T::kBc * 128;  // bytes of one 64-column block of K_n or V_n
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
  float* pin = reinterpret_cast<float*>(smem + T::kPinOff);  // written, never read
  const int t = threadIdx.x, wg = t / 128;
  // The swizzle is on address bits 4-9: every tile must start 1024-aligned.
  if (smem_u32(smem) % 1024 != 0) __trap();
  const int mb = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int m0 = mb * T::kBr, b = blockIdx.y / p.hq, h = blockIdx.y % p.hq, hk = h / (p.hq / p.hkv);
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
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    regs_dec<T::kProducerRegs>();
    if (t != 0 || n_end == 0) return;
    mbar_expect_tx(fullQ, T::kConsumers * T::kQTile);
    for (int c = 0; c < T::kConsumers; ++c)
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sQ + c * T::kQTile + x * kQBlock, a.q_map, fullQ, x * T::kBox, m0 + 64 * c, h, b);
    for (int n = 0; n < n_end; ++n) {
      const int st = n % T::kStages;
      const uint32_t ph = (n / T::kStages) & 1;  // the stage's use n / kStages; its release was the use before
      if (n >= T::kStages) mbar_wait(emptyK + st, ph ^ 1);
      mbar_expect_tx(fullK + st, T::kKVTile);
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sK + st * T::kKVTile + x * kKVBlock, a.k_map, fullK + st, x * T::kBox, n * T::kBc, hk, b);
      if (n >= T::kStages) mbar_wait(emptyV + st, ph ^ 1);
      mbar_expect_tx(fullV + st, T::kKVTile);
      for (int x = 0; x < T::kD / T::kBox; ++x)
        tma_load(sV + st * T::kKVTile + x * kKVBlock, a.v_map, fullV + st, x * T::kBox, n * T::kBc, hk, b);
    }
    return;
  }

  regs_inc<T::kConsumerRegs>();
  const int c = wg - 1, tc = t - 128 * wg, w = tc / 32, g = (tc % 32) / 4, c2 = 2 * (tc % 4);
  const unsigned char* q = sQ + c * T::kQTile;
  const int rowc = m0 + 64 * c;          // this consumer's first row
  const int row0 = rowc + 16 * w + g;    // this thread's rows: row0 and row0 + 8
  // Accumulators in mma's C layout per warp: element 4 i + 2 hh + e is row
  // row0 + 8 hh, column 8 i + c2 + e.
  float o[T::kD / 2], s[T::kBc / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  uint32_t pf[T::kBc / 4];  // P (fp16 pairs) of the step whose P V is next: wgmma's A fragments
#pragma unroll
  for (int i = 0; i < T::kD / 2; ++i) o[i] = 0.f;

  auto s_gemm = [&](int n) {  // issue S = Q K_n^T; not waited for
    const unsigned char* k = sK + (n % T::kStages) * T::kKVTile;
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kD / 16; ++j)  // column block j / 4, k16 step j % 4 (32 bytes each)
      wgmma_ss(s, desc(q + (j / 4) * kQBlock + (j % 4) * 32, 16, 1024), desc(k + (j / 4) * kKVBlock + (j % 4) * 32, 16, 1024),
               j > 0);
    wgmma_commit();
    fence_regs(s);
  };
  auto pv_gemm = [&](int n) {  // issue O += P V_n; not waited for
    const unsigned char* v = sV + (n % T::kStages) * T::kKVTile;
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kBc / 16; ++j) {  // keys 16 j .. 16 j + 15 (16 rows of 128 bytes)
      const uint32_t af[4] = {pf[4 * j], pf[4 * j + 1], pf[4 * j + 2], pf[4 * j + 3]};
      wgmma_rs(o, af, desc(v + j * 16 * 128, kKVBlock, 1024));
    }
    wgmma_commit();
    fence_regs(o);
  };
  // Mask (kMasked: the blocks that reach past Nk or, causal, past a row's
  // diagonal) and online softmax on S_n in place: s becomes unnormalised P_n;
  // m, l updated, alpha the factor O still owes.
  auto softmax = [&](int n, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int col0 = n * T::kBc;
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
          if (kMasked && (col >= p.nk || (kCausal && col > row + shift))) x = -INFINITY;
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
  auto rescale = [&]() {  // O owes alpha of the last softmax, before its P V accumulates
#pragma unroll
    for (int i = 0; i < T::kD / 8; ++i) {
      o[4 * i] *= alpha[0];
      o[4 * i + 1] *= alpha[0];
      o[4 * i + 2] *= alpha[1];
      o[4 * i + 3] *= alpha[1];
    }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int i = 0; i < T::kBc / 4; ++i) pf[i] = pack(s[2 * i], s[2 * i + 1]);
  };
  // Step n >= 1, FA3's order: S_n issued first, so the tensor cores start it
  // while O is rescaled for P_{n-1}, whose P V is issued next and runs under
  // the softmax of S_n.
  auto step = [&](int n, auto masked) {
    const int st = n % T::kStages, sp = (n - 1) % T::kStages;
    mbar_wait(fullK + st, (n / T::kStages) & 1);
    s_gemm(n);
    rescale();
    mbar_wait(fullV + sp, ((n - 1) / T::kStages) & 1);
    pv_gemm(n - 1);
    wgmma_wait<1>();  // S_n is in; P_{n-1} V_{n-1} may still run
    fence_regs(s);
    mbar_arrive(emptyK + st);
    softmax(n, masked);
    // ptxas would hoist the wait above the exp2s (the empty asm fences order
    // the PTX, not its schedule): l needs every one of them, and its store
    // stays ahead of the wait, so the softmax runs under the P V GEMM.
    pin_before_wait(pin + tc + 128 * c, l[0] + l[1]);
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pf);  // P_{n-1} stays live up to here: the softmax must not take its registers
    mbar_arrive(emptyV + sp);
    pack_p();
  };

  if (n_end > 0) {
    // Blocks before n_mask need no mask for any of this consumer's rows: whole
    // blocks of keys, all at or left of its first row's diagonal.
    int n_mask = p.nk / T::kBc;
    if (kCausal) n_mask = min(n_mask, max(rowc + shift + 1, 0) / T::kBc);
    using Masked = std::true_type;
    using Unmasked = std::false_type;
    mbar_wait(fullQ, 0);
    mbar_wait(fullK, 0);
    s_gemm(0);
    wgmma_wait<0>();
    fence_regs(s);
    mbar_arrive(emptyK);
    if (0 < n_mask) softmax(0, Unmasked{});
    else softmax(0, Masked{});
    pack_p();
    int n = 1;
    for (; n < min(n_mask, n_end); ++n) step(n, Unmasked{});
    for (; n < n_end; ++n) step(n, Masked{});
    const int nl = n_end - 1;
    rescale();
    mbar_wait(fullV + nl % T::kStages, (nl / T::kStages) & 1);
    pv_gemm(nl);
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
    for (int i = 0; i < T::kD / 8; ++i)
      *reinterpret_cast<__half2*>(gO + row * p.o_row_stride + 8 * i + c2) =
          __floats2half2_rn(o[4 * i + 2 * hh] * inv, o[4 * i + 2 * hh + 1] * inv);
    if (tc % 4 == 0) gL[row] = seen ? fmaf(m[hh], p.scale, logf(sum)) : -INFINITY;
  }
}

}  // namespace sm90
