// bwd_sm90_check.cu: lab harness for the Hopper backward (kernels/bwd_sm90.cuh),
// llm.c dev/cuda style: a float64 CPU check and a timing loop of the single
// pass alone, for tuning it. The product's conformance suites check the
// whole call (pre, single pass, convert) through the Go API.
//
// Versions of the kernel (this file's git history keeps each; the product
// runs the last). The figures of v1-v11 were timed on all-zero inputs; the
// bench now fills N(0, 1) values, as the product bench does.
//   v1  FA3's structure, simplest form: dQ by fp32 atomics, LSE and Di read
//       from global memory per element, every block masked.
//   v2  P^T computed while dP^T's GEMM runs, the registers pinned so that
//       ptxas issues the wgmmas back to back; dQ_m's partials in fragment
//       order, added by one TMA bulk reduce-add per consumer and block; at
//       D128 dQ split by columns. D128 N 8192: 250 TFLOP/s against v1's 130
//       (H200).
//   v3  v2 in a fixed dQ order (turn counters, a dQ writer thread).
//   v4  LSE and Di staged in shared memory by the producer (padded, LSE in
//       log2 units), the mask only on the blocks that need it: D128 N 8192
//       482 TFLOP/s, D64 343 (H200): the per-element global loads of LSE and
//       Di sat in the softmax's critical path.
//   v5  v3's order with v4's staging: the product's _ordered kernels.
//   v6  D64 in query blocks of 128, dQ_m split by rows between the consumers
//       (disjoint partials, one add each): H100, N 1024-16384, plain
//       1.17-1.19x v4 (N 8192 351 -> 415 TFLOP/s), ordered 1.45-1.67x v5.
//   v7  D128: dV's GEMM issued once P^T is packed, dK's once dS^T is, so
//       dS^T is computed and stored under them; dS^T in two buffers. H100,
//       N 1024-16384: plain and causal 1.09-1.15x v6 (N 8192 496 -> 562
//       TFLOP/s), ordered 0.99-1.03x.
//   v8  D128: P^T by ex2.approx.ftz. H100, N 1024-16384: plain and causal
//       1.03-1.04x v7 (N 8192 563 -> 588 TFLOP/s), ordered 0.99-1.01x.
//   v9  the ordered twin without causality: key block nb starts at query
//       block nb Tr / Tc and wraps around, turns in arrival order, where the
//       host allows it (det_spread: Tc <= SMs / 2). H100, ordered non-causal,
//       N 1024-8192: D64 1.07-1.19x v8, D128 1.05-1.12x.
//   v10 D64: Di loaded four column groups ahead of its use (a dS^T store
//       between the loads kept ptxas from hoisting them: every dS waited for
//       its load); the first two LSE groups loaded under S^T's GEMM; dV's and
//       dQ_m's GEMMs first, dK's under dQ_m's epilogue (kLateDK). H100, the
//       pass alone, N 1024-16384, one interleaved run of each part against
//       v9: Di ahead 1.14-1.19x (D64 plain), LSE early a further 1-2% (D128
//       causal 1.01x), dK late 1.16-1.21x with the first.
//   v11 D128: dK's GEMM under dQ_m's epilogue too (kLateDK), dV's still
//       issued early (kEarlyDV). H100, the pass alone, N 1024-16384, two
//       interleaved rounds against v10: plain 1.02-1.05x, causal
//       1.01-1.04x, ordered 1.01-1.05x (fp16 and bf16).
//   v12 D128 in query blocks of 80 (FA3's D128 tile): dQ_m^T = K^T dS^T by
//       wgmma (M: a consumer's 64 columns, N: the 80 queries), dS^T stored
//       in 8x8 core matrices, dS from P^T's packed pairs (the fp32 P^T live
//       through dP^T's subtraction spilled 8-32 B), bwd_dqconv transposing
//       back. H100, the whole backward through Go beside v11, N 2048-16384,
//       fp16: plain 1.00-1.03x, causal 0.97-1.04x, ordered 1.05-1.06x.
//   v13 the plain causal pass's CTAs in groups of (b, kv head) pairs, each
//       group's key blocks heaviest first (BwdCausalOrder; lightest first,
//       one pair after the other, before: BWD_LIGHT_FIRST=1 runs that). A
//       model of the dispatch (tile_order_check.cu) gives the last SM's end
//       over the mean 1.06-1.08 -> 1.00-1.02 at D128, 1.03-1.04 -> 1.00-1.01
//       at D64 on the paper shapes. H100, the whole causal backward through
//       Go beside v12, fp16, one run: N 2048-16384 D128 1.01-1.08x (N 16384
//       528 -> 572 TFLOP/s), D64 1.02-1.05x; N 512-1024 D128 0.87-0.93x, D64
//       0.90-0.97x (the model has no L2), so the host groups from Tc 16 on.
//   Not kept (git history has them): D128's first four Di groups loaded
//       under dP^T's GEMM (0.99-1.02x v10, ordered 0.99x; on v11 within 1%,
//       ordered 0.98-1.00x); at D64 the two consumers' partials summed in
//       shared memory before one add (H100, N 1024-16384: plain
//       0.89-0.93x v4, ordered 1.11-1.20x v5); the next block's S^T and dP^T
//       issued before this block's dQ epilogue (ptxas serialised every wgmma);
//       a rotated D64 loop, block g-1's dV and dK under block g's softmax
//       (1.03-1.05x v4, 0.88-0.90x v6, with which it does not fit the registers);
//       v7's early GEMMs and two buffers at D64 (spilled); P^T by ex2.approx
//       at D64 (plain 0.98-0.99x, its ordered causal twin spilled); the
//       ordered twin on a heads-fastest grid as the sm_80 one's (0.61-0.92x
//       v8 at N 1024-8192); at D64 block g's dQ GEMM issued in block g + 1
//       so that the consumers never meet (two dS^T buffers handed over by
//       mbarriers: plain 0.95-1.01x v8); two dS^T buffers alone at D64
//       (plain 1.00-1.02x, the ordered twin spilled); a causal-only D128
//       tile of Br 64 with v13's groups (BWD_D128_BR=64; the pass alone
//       1.01-1.04x Br 80 at N 1024-4096, 0.98-0.99x at 8192-16384, H100).
//       A persistent D128 pass (one CTA per SM; non-causal by a static
//       stride, causal from a counter in the one-CTA-per-tile order; the
//       next tile's K and V loaded while the last one's dK and dV are
//       stored): level with one CTA per tile (H100, 0.97-1.03x, N
//       1024-16384); heaviest first over all pairs, 0.60x at N 1024.
//   Not yet: ping-pong between the consumers.
//
// Build on the GPU machine (nvcc 12.3+), from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a kernels/dev/bwd_sm90_check.cu -o .build/bwd_sm90 -ldl
//   .build/bwd_sm90 check    # odd shapes, fp16 and bf16, D 64 and 128, causal and not, GQA; the ordered pass bit-reproducible
//   .build/bwd_sm90 bench    # FA2 paper shapes (16k tokens, hidden 2048), TFLOP/s of the single pass alone
//   .build/bwd_sm90 sanitize  # check's small problems alone, for compute-sanitizer (memcheck, racecheck, synccheck)
//   BWD_LIGHT_FIRST=1: the plain causal pass in the earlier CTA order (v13's A/B);
//   BWD_CAUSAL_GROUPS=n: n groups (at most the pairs), so that check's small shapes run several;
//   BWD_D128_BR=64: D128 in query blocks of 64 (v11's tile, FA3's causal one) instead of the shipped 80.
// Here (no GPU): $(kernels/cuda12.sh) ... with the same flags builds it too
// (the static CUDA runtime comes with it).
//
// Check rule (as bwd_check.cu): inputs ~ N(0,1) rounded to 16 bits; O, LSE from
// the float64 forward; truth = float64 gradients; the GPU's max error per
// output must be within 2x a baseline that rounds P and dS to the 16-bit type
// plus 4 unit roundoffs of the largest |truth|.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "dev.h"
#include "../bwd_sm90.cuh"

constexpr float kLog2e = 1.4426950408889634f;

template <class T, bool C, class E, bool Det>
__global__ void __launch_bounds__(T::kThreads, 1) lab_bwd(const __grid_constant__ Sm90BwdArgs a) {
  sm90::bwd_kernel<T, C, E, Det>(a);
}


// ---------------------------------------------------------------------------
// Host: tensor maps, launch, float64 reference, check and bench.
// ---------------------------------------------------------------------------
// Host: tensor maps, launch, float64 reference, check and bench.

// The map of a BSHD tensor (B, N, H, D) of 16-bit elements in boxes of 64 x rows.
template <class E>
static void make_map(unsigned char* out, const void* base, int b, int n, int h, int d, int rows) {
  const CUresult r = tensor_map16(out, std::is_same<E, __nv_bfloat16>::value, base, d, n, h, b, int64_t(h) * d, d, int64_t(n) * h * d, rows);
  if (r != CUDA_SUCCESS) std::exit((std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r)), 1));
}

template <class E>
static float to_f(E x) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) return __bfloat162float(x);
  else return __half2float(x);
}
template <class E>
static E from_f(float x) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <class E>
static double rnd(double x) { return to_f<E>(from_f<E>(float(x))); }

struct Problem {
  int b, nq, nk, hq, hkv, d;
  bool causal;
};

// The gradients of one problem: truth (float64), the baseline (P and dS
// rounded to E, outputs rounded) and the GPU's; O, LSE and Di as the kernel reads them.
template <class E>
struct Run {
  Problem pr;
  std::vector<E> q, k, v, dout;
  std::vector<float> lse, di;
  std::vector<double> tq, tk, tv, bq, bk, bv;  // truth, baseline
};

template <class E>
static Run<E> reference(const Problem& pr, uint32_t seed) {
  Run<E> r{pr};
  const int B = pr.b, Nq = pr.nq, Nk = pr.nk, Hq = pr.hq, Hkv = pr.hkv, D = pr.d, grp = Hq / Hkv;
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<E>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = from_f<E>(nd(gen));
  };
  fill(r.q, size_t(B) * Nq * Hq * D);
  fill(r.k, size_t(B) * Nk * Hkv * D);
  fill(r.v, size_t(B) * Nk * Hkv * D);
  fill(r.dout, size_t(B) * Nq * Hq * D);
  r.lse.assign(size_t(B) * Hq * Nq, 0.f);
  r.di.assign(size_t(B) * Hq * Nq, 0.f);
  for (auto* x : {&r.tq, &r.bq}) x->assign(r.q.size(), 0.0);
  for (auto* x : {&r.tk, &r.tv, &r.bk, &r.bv}) x->assign(r.k.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(D));
  auto Q = [&](int b, int i, int h, int x) { return double(to_f<E>(r.q[((size_t(b) * Nq + i) * Hq + h) * D + x])); };
  auto K = [&](int b, int j, int h, int x) { return double(to_f<E>(r.k[((size_t(b) * Nk + j) * Hkv + h) * D + x])); };
  auto V = [&](int b, int j, int h, int x) { return double(to_f<E>(r.v[((size_t(b) * Nk + j) * Hkv + h) * D + x])); };
  auto dO = [&](int b, int i, int h, int x) { return double(to_f<E>(r.dout[((size_t(b) * Nq + i) * Hq + h) * D + x])); };
  std::vector<double> p(Nk), dp(Nk), o(D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      const int hk = h / grp;
      for (int i = 0; i < Nq; ++i) {
        double mx = -INFINITY;
        const int last = pr.causal ? std::min(Nk - 1, i + Nk - Nq) : Nk - 1;
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int x = 0; x < D; ++x) s += Q(b, i, h, x) * K(b, j, hk, x);
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        const size_t li = (size_t(b) * Hq + h) * Nq + i;
        if (last < 0) {
          r.lse[li] = -INFINITY;
          continue;  // no key: O = 0, gradients 0
        }
        double l = 0;
        for (int j = 0; j <= last; ++j) l += (p[j] = std::exp(p[j] - mx));
        for (int j = 0; j <= last; ++j) p[j] /= l;
        r.lse[li] = float(mx + std::log(l));
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j <= last; ++j)
          for (int x = 0; x < D; ++x) o[x] += p[j] * V(b, j, hk, x);
        double di = 0;
        for (int x = 0; x < D; ++x) di += dO(b, i, h, x) * rnd<E>(o[x]);  // O as the forward stored it
        r.di[li] = float(di);
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int x = 0; x < D; ++x) s += dO(b, i, h, x) * V(b, j, hk, x);
          dp[j] = s;
        }
        for (int base = 0; base < 2; ++base) {
          auto& gq = base ? r.bq : r.tq;
          auto& gk = base ? r.bk : r.tk;
          auto& gv = base ? r.bv : r.tv;
          for (int j = 0; j <= last; ++j) {
            const double pj = base ? rnd<E>(p[j]) : p[j];
            const double ds = base ? rnd<E>(p[j] * (dp[j] - r.di[li])) : p[j] * (dp[j] - di);
            for (int x = 0; x < D; ++x) {
              gq[((size_t(b) * Nq + i) * Hq + h) * D + x] += scale * ds * K(b, j, hk, x);
              gk[((size_t(b) * Nk + j) * Hkv + hk) * D + x] += scale * ds * Q(b, i, h, x);
              gv[((size_t(b) * Nk + j) * Hkv + hk) * D + x] += pj * dO(b, i, h, x);
            }
          }
        }
      }
    }
  for (auto* x : {&r.bq, &r.bk, &r.bv})
    for (auto& e : *x) e = rnd<E>(e);
  return r;
}


template <class E>
struct DevRun {
  E *q, *k, *v, *dout, *dk, *dv;
  float* acc;  // the product's scratch: accumulator, LSE log2(e), Di, turns (Sm90BwdArgs)
  int br, rows;  // query block rows, accumulator rows per (b, h)
  size_t acc_floats;  // the accumulator part
  Sm90BwdArgs a;
};

// The D128 tile: the shipped one, or with BWD_D128_BR=64 query blocks of 64.
using T128Br64 = Tile90Bwd<128, 64, 128, 2, true>;
static bool d128_br64() {
  const char* v = std::getenv("BWD_D128_BR");
  return v && std::atoi(v) == 64;
}
static int br_of(int d) {
  return d == 64 ? Sm90BwdTraits<64>::type::kBr : d128_br64() ? T128Br64::kBr : Sm90BwdTraits<128>::type::kBr;
}

// The pre kernel's work (here the host's): LSE log2(e) and Di padded to the
// accumulator's rows.
template <class E>
static DevRun<E> upload(const Problem& pr, const E* q, const E* k, const E* v, const E* dout, const float* lse, const float* di) {
  DevRun<E> d{};
  const size_t nqe = size_t(pr.b) * pr.nq * pr.hq * pr.d, nke = size_t(pr.b) * pr.nk * pr.hkv * pr.d;
  d.br = br_of(pr.d);
  d.rows = (pr.nq + d.br - 1) / d.br * d.br;
  const size_t bhr = size_t(pr.b) * pr.hq * d.rows;
  d.acc_floats = bhr * pr.d;
  CK(cudaMalloc(&d.q, nqe * 2));
  CK(cudaMalloc(&d.dout, nqe * 2));
  CK(cudaMalloc(&d.k, nke * 2));
  CK(cudaMalloc(&d.v, nke * 2));
  CK(cudaMalloc(&d.dk, nke * 2));
  CK(cudaMalloc(&d.dv, nke * 2));
  CK(cudaMalloc(&d.acc, (bhr * (pr.d + 2) + bhr / 64) * 4));
  std::vector<float> l2(bhr, INFINITY), dp(bhr, 0.f);
  if (q) {
    CK(cudaMemcpy(d.q, q, nqe * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dout, dout, nqe * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, k, nke * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, v, nke * 2, cudaMemcpyHostToDevice));
    for (size_t bh = 0; bh < size_t(pr.b) * pr.hq; ++bh)
      for (int i = 0; i < pr.nq; ++i) {
        const float l = lse[bh * pr.nq + i];
        l2[bh * d.rows + i] = l == -INFINITY ? INFINITY : l * kLog2e;
        dp[bh * d.rows + i] = di[bh * pr.nq + i];
      }
  } else {  // bench: inputs ~ N(0, 1), as the product bench's (all-zero operands need not time as real data does)
    fill_random<E><<<1024, 256>>>(d.q, nqe, 1);
    fill_random<E><<<1024, 256>>>(d.dout, nqe, 2);
    fill_random<E><<<1024, 256>>>(d.k, nke, 3);
    fill_random<E><<<1024, 256>>>(d.v, nke, 4);
    CK(cudaDeviceSynchronize());
    // S scale ~ N(0, 1): a row's LSE is about ln Nk + 1/2, so P stays below 1.
    std::fill(l2.begin(), l2.end(), float((std::log(double(pr.nk)) + 0.5) * 1.4426950408889634));
  }
  CK(cudaMemcpy(d.acc + d.acc_floats, l2.data(), bhr * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.acc + d.acc_floats + bhr, dp.data(), bhr * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(d.dk, 0xff, nke * 2));  // NaN poison: every key's row must be written
  CK(cudaMemset(d.dv, 0xff, nke * 2));
  Sm90BwdArgs& a = d.a;
  make_map<E>(a.q_map, d.q, pr.b, pr.nq, pr.hq, pr.d, d.br);
  make_map<E>(a.do_map, d.dout, pr.b, pr.nq, pr.hq, pr.d, d.br);
  make_map<E>(a.k_map, d.k, pr.b, pr.nk, pr.hkv, pr.d, 128);
  make_map<E>(a.v_map, d.v, pr.b, pr.nk, pr.hkv, pr.d, 128);
  BwdParams& p = a.p;
  p.dq_accum = d.acc, p.dq_accum_rows = d.rows, p.dk = d.dk, p.dv = d.dv;
  p.dk_batch_stride = p.dv_batch_stride = int64_t(pr.nk) * pr.hkv * pr.d;
  p.dk_row_stride = p.dv_row_stride = int64_t(pr.hkv) * pr.d;
  p.dk_head_stride = p.dv_head_stride = pr.d;
  p.b = pr.b, p.nq = pr.nq, p.nk = pr.nk, p.hq = pr.hq, p.hkv = pr.hkv, p.d = pr.d;
  p.scale = float(1.0 / std::sqrt(double(pr.d))), p.scale_log2 = p.scale * kLog2e;
  return d;
}

template <class E>
static void release(DevRun<E>& d) {
  for (void* p : {(void*)d.q, (void*)d.k, (void*)d.v, (void*)d.dout, (void*)d.dk, (void*)d.dv, (void*)d.acc}) CK(cudaFree(p));
}

// The single pass alone: the accumulator and the turns zeroed (the pre kernel's work), then it.
template <class T, class E, bool C, bool Det>
static void launch_as(const Problem& pr, DevRun<E>& d, cudaStream_t s) {
  auto* fn = lab_bwd<T, C, E, Det>;
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  const size_t bhr = size_t(pr.b) * pr.hq * d.rows;
  CK(cudaMemsetAsync(d.acc, 0, d.acc_floats * 4, s));
  CK(cudaMemsetAsync(d.acc + d.acc_floats + 2 * bhr, 0, bhr / 64 * 4, s));
  int sms = 0;  // the product's rule (flashattn's plan.detSpread): a (b, kv head)'s key blocks fit half the SMs
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int tc = (pr.nk + T::kBc - 1) / T::kBc;
  d.a.det_spread = tc <= sms / 2;
  // flashattn's hopperCausalGroups: from Tc 16 on, groups of at least 2 SMs / Tc (b, kv head) pairs, heaviest key blocks first.
  const int bhs = pr.b * pr.hkv, per = std::max(1, (2 * sms + tc - 1) / tc);
  d.a.causal_groups = C && !Det && tc >= 16 ? (per >= bhs ? 1 : bhs / per) : 0;
  auto env = [](const char* k) { const char* v = std::getenv(k); return v ? std::atoi(v) : 0; };
  if (env("BWD_LIGHT_FIRST")) d.a.causal_groups = 0;  // the earlier order, for an A/B
  if (env("BWD_CAUSAL_GROUPS") && C && !Det) d.a.causal_groups = std::min(env("BWD_CAUSAL_GROUPS"), bhs);  // check's small shapes in several groups
  fn<<<dim3(tc, pr.b * pr.hkv), T::kThreads, T::kSmemBytes, s>>>(d.a);
  CK(cudaGetLastError());
}
template <class E, bool Det>
static void launch(const Problem& pr, DevRun<E>& d, cudaStream_t s = 0) {
  using T64 = Sm90BwdTraits<64>::type;
  using T128 = Sm90BwdTraits<128>::type;
  if (pr.d == 64) pr.causal ? launch_as<T64, E, true, Det>(pr, d, s) : launch_as<T64, E, false, Det>(pr, d, s);
  else if (d128_br64()) pr.causal ? launch_as<T128Br64, E, true, Det>(pr, d, s) : launch_as<T128Br64, E, false, Det>(pr, d, s);
  else pr.causal ? launch_as<T128, E, true, Det>(pr, d, s) : launch_as<T128, E, false, Det>(pr, d, s);
}

// Max |x - truth| over a gradient, and 4 unit roundoffs of E of its largest |truth|.
static void errs(const std::vector<double>& got, const std::vector<double>& truth, double& err, double& tmax) {
  err = tmax = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - truth[i]));
    tmax = std::max(tmax, std::fabs(truth[i]));
  }
}

static int acc_index(int r, int x, int d) {
  if (d == 64) return sm90::dq_acc_index<Sm90BwdTraits<64>::type>(r, x);
  return d128_br64() ? sm90::dq_acc_index<T128Br64>(r, x) : sm90::dq_acc_index<Sm90BwdTraits<128>::type>(r, x);
}

template <class E, bool Det>
static bool check_one(const Problem& pr, uint32_t seed) {
  Run<E> r = reference<E>(pr, seed);
  DevRun<E> d = upload<E>(pr, r.q.data(), r.k.data(), r.v.data(), r.dout.data(), r.lse.data(), r.di.data());
  launch<E, Det>(pr, d);
  CK(cudaDeviceSynchronize());
  std::vector<E> hk(r.k.size()), hv(r.k.size());
  std::vector<float> acc(d.acc_floats);
  CK(cudaMemcpy(hk.data(), d.dk, hk.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hv.data(), d.dv, hv.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(acc.data(), d.acc, acc.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> gq(r.q.size()), gk(hk.size()), gv(hv.size());
  for (size_t i = 0; i < gk.size(); ++i) gk[i] = to_f<E>(hk[i]), gv[i] = to_f<E>(hv[i]);
  for (int b = 0; b < pr.b; ++b)
    for (int i = 0; i < pr.nq; ++i)
      for (int h = 0; h < pr.hq; ++h)
        for (int x = 0; x < pr.d; ++x)  // the convert kernel's work: scale, round to E
          gq[((size_t(b) * pr.nq + i) * pr.hq + h) * pr.d + x] =
              rnd<E>(double(acc[((size_t(b) * pr.hq + h) * d.rows + i / d.br * d.br) * pr.d + acc_index(i % d.br, x, pr.d)]) * d.a.p.scale);
  release(d);
  const double u = std::is_same<E, __nv_bfloat16>::value ? 1.0 / 256 : 1.0 / 2048;
  bool ok = true;
  char line[512];
  int n = std::snprintf(line, sizeof line, "%s %s B%d Nq%d Nk%d H%d/%d D%d%s:", Det ? "ordered" : "plain  ",
                        std::is_same<E, __half>::value ? "fp16" : "bf16", pr.b, pr.nq, pr.nk, pr.hq, pr.hkv, pr.d, pr.causal ? " causal" : "");
  const char* names[3] = {"dQ", "dK", "dV"};
  const std::vector<double>* got[3] = {&gq, &gk, &gv};
  const std::vector<double>* tru[3] = {&r.tq, &r.tk, &r.tv};
  const std::vector<double>* bas[3] = {&r.bq, &r.bk, &r.bv};
  for (int o = 0; o < 3; ++o) {
    double eg, eb, tm;
    errs(*got[o], *tru[o], eg, tm);
    errs(*bas[o], *tru[o], eb, tm);
    const double bound = 2 * eb + 4 * u * tm;
    ok = ok && eg <= bound;
    n += std::snprintf(line + n, sizeof line - n, " %s %.2e (bound %.2e)", names[o], eg, bound);
  }
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", line);
  return ok;
}

// repeats: also the ordered pass's bit-for-bit repeats on multi-wave problems
// (without them, "sanitize": small problems only, for compute-sanitizer).
static int check(bool repeats) {
  const Problem ps[] = {
      {1, 1, 1, 1, 1, 64, false},      {1, 17, 17, 2, 1, 64, true},     {1, 97, 97, 2, 2, 128, false},
      {2, 130, 257, 4, 2, 64, true},   {1, 257, 130, 4, 1, 128, true},  {1, 300, 300, 4, 4, 128, true},
      {2, 200, 333, 8, 2, 128, false}, {1, 1025, 1025, 2, 1, 64, true}, {1, 513, 700, 2, 2, 128, false},
      {2, 200, 333, 4, 2, 64, false},  {1, 300, 130, 4, 1, 64, true},  // D64: a last query block of 72 or 44 rows
  };
  int fails = 0;
  uint32_t seed = 1;
  for (const auto& p : ps) {
    fails += !check_one<__half, false>(p, seed);
    fails += !check_one<__half, true>(p, seed++);
    fails += !check_one<__nv_bfloat16, false>(p, seed);
    fails += !check_one<__nv_bfloat16, true>(p, seed++);
  }
  if (!repeats) {
    std::printf(fails ? "CHECK FAILED (%d)\n" : "all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  // The ordered pass is deterministic: the same dQ accumulator, bit for bit,
  // over 5 runs, on problems of many CTA waves (cheap inputs: N(0,1), LSE =
  // ln Nk + 4 so that P stays small, Di ~ N(0,1); no float64 forward). The
  // plain pass, whose order is the hardware's, is printed beside it as a control.
  for (const Problem& p : {Problem{2, 4096, 4096, 16, 16, 128, true}, Problem{2, 4096, 4096, 16, 16, 128, false},
                           Problem{4, 2000, 3000, 16, 4, 64, true}, Problem{2, 3000, 2000, 8, 8, 64, false}}) {
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t nqe = size_t(p.b) * p.nq * p.hq * p.d, nke = size_t(p.b) * p.nk * p.hkv * p.d, nl = size_t(p.b) * p.hq * p.nq;
    std::vector<__half> q(nqe), k(nke), v(nke), dout(nqe);
    for (auto* x : {&q, &k, &v, &dout})
      for (auto& e : *x) e = __float2half_rn(nd(gen));
    std::vector<float> lse(nl, std::log(float(p.nk)) + 4.f), di(nl);
    for (auto& e : di) e = nd(gen);
    DevRun<__half> d = upload<__half>(p, q.data(), k.data(), v.data(), dout.data(), lse.data(), di.data());
    bool same[2] = {true, true};
    for (int ver = 0; ver < 2; ++ver) {
      std::vector<float> first, acc(d.acc_floats);
      for (int rep = 0; rep < 5; ++rep) {
        ver == 0 ? launch<__half, true>(p, d) : launch<__half, false>(p, d);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(acc.data(), d.acc, acc.size() * 4, cudaMemcpyDeviceToHost));
        if (rep == 0) first = acc;
        else same[ver] = same[ver] && std::memcmp(first.data(), acc.data(), acc.size() * 4) == 0;
      }
    }
    release(d);
    std::printf("%s ordered: dQ accumulator identical over 5 runs (B%d Nq%d Nk%d H%d/%d D%d%s; plain: %s)\n", same[0] ? "ok  " : "FAIL", p.b,
                p.nq, p.nk, p.hq, p.hkv, p.d, p.causal ? " causal" : "", same[1] ? "identical too" : "differs, as expected");
    fails += !same[0];
  }
  std::printf(fails ? "CHECK FAILED (%d)\n" : "all checks passed\n", fails);
  return fails ? 1 : 0;
}

template <class E, bool Det>
static void bench_dtype(const char* name) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (int n : {1024, 2048, 4096, 8192, 16384}) {
        const Problem pr{16384 / n, n, n, 2048 / d, 2048 / d, d, causal};
        char row[64];  // BWD_BENCH_ONLY="fp16 plain D128 nc N8192"-style: that row alone (a profiler's run)
        std::snprintf(row, sizeof row, "%s %s D%d %s N%d", name, Det ? "ordered" : "plain", d, causal ? "causal" : "nc", n);
        if (const char* only = std::getenv("BWD_BENCH_ONLY"); only && std::strcmp(only, row) != 0) continue;
        DevRun<E> dr = upload<E>(pr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
        std::vector<float> ms;
        for (int it = 0; it < 25; ++it) {
          CK(cudaEventRecord(e0));
          launch<E, Det>(pr, dr);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float t;
          CK(cudaEventElapsedTime(&t, e0, e1));
          if (it >= 5) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        const double flops = 2.5 * 4.0 * pr.b * pr.hq * double(n) * n * d / (causal ? 2 : 1);
        std::printf("bench %s %s D%d %s N%5d: %.3f ms %6.1f TFLOP/s (accumulator zeroing included; pre and convert not)\n", Det ? "ordered" : "plain  ",
                    name, d, causal ? "causal" : "plain ", n, med, flops / med / 1e9);
        release(dr);
      }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  if (mode == "check" || mode == "sanitize") return check(mode == "check");
  if (mode == "bench") {
    bench_dtype<__half, false>("fp16");
    bench_dtype<__half, true>("fp16");
    bench_dtype<__nv_bfloat16, false>("bf16");
    return 0;
  }
  std::fprintf(stderr, "usage: bwd_sm90 check|sanitize|bench\n");
  return 2;
}
