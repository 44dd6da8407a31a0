// bwd_check.cu: dev harness for the FA2 backward kernels (llm.c dev/cuda style):
// a float64 CPU reference check of every shipped backward variant (pre + dK/dV
// + dQ, and the single pass: pre + dK/dV/dQ with atomics + dQ convert, "kvq",
// and its ordered twin, "_det": the dQ additions in a fixed order, grid (B*Hkv, Tc), a dev
// instance for every single-pass row and mask, shipped or not) on small odd shapes (N
// 1/17/97/..., Nq != Nk both ways, GQA and MQA, causal rows that see no key),
// bit-reproducibility (dK and dV only for the unordered single pass), and NaN-poisoned outputs (and dQ accumulator) with guard words. Speed
// is measured side by side with PyTorch in sidebyside.py --bwd; BWD_BENCH
// compares tiles. Dev-only tiles of the single pass: a wrapper .cu that defines
// BWD_DEV_TILES(X) (see below) and includes this file.
//
// Build here (nvcc 11.8) or on the GPU machine, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 kernels/dev/bwd_check.cu -o .build/bwd_check -ldl
//   .build/bwd_check internal/kernels       (BWD_BENCH=1: per-kernel timings, see bench below;
//                                            BWD_ONLY=sm80_d64 checks the variants whose name has it)
//   BWD_SHAPES=1,3,7 compute-sanitizer --tool racecheck .build/bwd_check   (a few shapes)
// Kernel sources: "tpl75"/"tpl80" = the Turing / sm_80 path templates compiled
// into this binary; "ptx75" = internal/kernels/fa2_bwd_ptx75.fatbin through the
// driver's JIT (how Go forces the sm_75 path).
//
// Inputs: q, k, v, dO ~ N(0,1) in fp16; O and LSE from the float64 forward (O
// rounded to fp16), so the backward is checked alone. Truth: float64 gradients.
// Baseline (as flashattn/attntest): P, dS and the outputs rounded to fp16, Di
// from the fp16 O, Di and dP summed in float32 in opposite orders. Rule: GPU
// max error <= 2x the baseline's + 4 fp16 unit roundoffs of the largest |truth|
// (the last rounding, which an exact baseline may not pay) + for dQ and dK the
// first-order float32 error of the dP - Di cancellation (see main: it matters
// only where the truth is ~0, e.g. Nk = 1); rows that see no key must give
// dQ = 0 exactly.
//
// Modes and output: README.md; the figures measured with it: docs/kernels.md.
#include <cuda_runtime.h>
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../fwd.cu"
#include "../bwd.cu"
#include "dev.h"

// One launchable kernel (runtime-API template or driver-API module function).
struct Fn {
  std::string name;
  const void* fn = nullptr;
  CUfunction cf = nullptr;
  int warps = 0, smem = 0;
  void prepare() const {
    if (smem <= 48 * 1024) return;
    if (fn) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    else drv.check(drv.FuncSetAttribute(cf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), name.c_str());
  }
  void launch(unsigned gx, unsigned gy, const BwdParams& p) const {
    BwdParams pp = p;
    void* args[] = {&pp};
    if (fn) CK(cudaLaunchKernel(fn, dim3(gx, gy), dim3(warps * 32), args, smem, 0));
    else drv.check(drv.LaunchKernel(cf, gx, gy, 1, warps * 32, 1, 1, smem, 0, args, nullptr), name.c_str());
  }
};

// The kernels of one (arch path, D, causal) backward. Three-kernel path: pre,
// kv = dK/dV, dq. Single pass (fused): pre, kv = dK/dV/dQ by atomics into the
// fp32 accumulator (pre zeroes it), dq = the dQ convert kernel (on pre's grid).
struct Bwd {
  std::string src;
  int arch, d;
  bool causal, fused = false;
  bool det = false;  // the fused kernel's kDet: the dQ additions ordered, grid (B*Hkv, Tc)
  int kv_bc, dq_br, acc_br = 0;  // acc_br: the fused tile's Br (dq_accum rows are padded to it)
  Fn pre, kv, dq;
  std::string tag;  // the shipped single pass's size (base, large), a dev tile's name, or "" (three kernels)
  std::string name() const {
    return std::string(fused ? "kvq" : "") + "sm" + std::to_string(arch) + "_d" + std::to_string(d) + (causal ? "_causal" : "") +
           (tag.empty() ? "" : "_" + tag);
  }
  // The accumulator's rows per (b, h), and its floats; after them (det) one int
  // counter per (b, h, query block).
  int acc_rows(const BwdParams& p) const { return (p.nq + acc_br - 1) / acc_br * acc_br; }
  size_t acc_floats(const BwdParams& p) const { return (size_t)p.b * p.hq * acc_rows(p) * p.d; }
  // ev (optional): 4 events recorded around the three launches (per-kernel times).
  // The pre kernel zeroes the accumulator's floats (left as the caller had
  // them: NaN in check_one); the det counters are zeroed here.
  void run(BwdParams p, cudaEvent_t* ev = nullptr) const {
    p.dq_accum_rows = fused ? acc_rows(p) : 0;
    if (!fused) p.dq_accum = nullptr;
    if (det) CK(cudaMemsetAsync(p.dq_accum + acc_floats(p), 0, (size_t)p.b * p.hq * (acc_rows(p) / acc_br) * 4));
    if (ev) CK(cudaEventRecord(ev[0]));
    pre.launch((p.nq + fa2::kPreRows - 1) / fa2::kPreRows, p.b * p.hq, p);
    if (ev) CK(cudaEventRecord(ev[1]));
    if (det) kv.launch(p.b * p.hkv, (p.nk + kv_bc - 1) / kv_bc, p);
    else kv.launch((p.nk + kv_bc - 1) / kv_bc, p.b * p.hkv, p);
    if (ev) CK(cudaEventRecord(ev[2]));
    dq.launch((p.nq + dq_br - 1) / dq_br, p.b * p.hq, p);
    if (ev) CK(cudaEventRecord(ev[3]));
  }
};

// What every backward of (A, D, C) shares: the pre kernel.
template <int A, int D, bool C>
Bwd make_pre(const void* pre) {
  Bwd b;
  b.src = A == 75 ? "tpl75" : "tpl80";
  b.arch = A; b.d = D; b.causal = C;
  b.pre = Fn{"fa2_bwd_pre_sm" + std::to_string(A) + "_d" + std::to_string(D), pre, nullptr, fa2::kPreThreads / 32, 0};
  return b;
}

template <int A, int D, bool C>
Bwd make_bwd(const void* pre, const void* kv, const void* dq) {
  using KV = typename BwdKVTraits<A, D>::type;
  using Q = typename BwdQTraits<A, D>::type;
  Bwd b = make_pre<A, D, C>(pre);
  b.kv_bc = KV::kRows; b.dq_br = Q::kRows;
  const std::string sfx = "_sm" + std::to_string(A) + "_d" + std::to_string(D);
  b.kv = Fn{"fa2_bwd_dkdv" + sfx + (C ? "_causal" : ""), kv, nullptr, KV::kWarps, KV::kSmemBytes};
  b.dq = Fn{"fa2_bwd_dq" + sfx + (C ? "_causal" : ""), dq, nullptr, Q::kWarps, Q::kSmemBytes};
  return b;
}

// The single pass with tile T (bwd_kv.cuh): kv computes dK, dV and (Q) dQ;
// without Q, dQ comes from the three-kernel path's dQ kernel (deterministic),
// which D256 has none of (its single pass ships alone).
// det: the kernel's kDet (a dev instance of the template fa2_bwd_dkdvqdet_* ships).
template <class T, bool C, bool Q>
Bwd make_kvq(const void* pre, const void* kv, const void* dq, const std::string& tag, bool det = false) {
  constexpr int A = T::kArch, D = T::kD;
  Bwd b;
  if constexpr (Q) b = make_pre<A, D, C>(pre);
  else b = make_bwd<A, D, C>(pre, nullptr, dq);
  b.fused = Q;
  b.acc_br = T::kBr;
  b.det = det;
  b.tag = Q ? tag + (det ? "_det" : "") : tag + "_3k";
  const std::string sfx = "_sm" + std::to_string(A) + "_d" + std::to_string(D);
  b.kv = Fn{(Q ? (det ? "dev_dkdvqdet" : "fa2_bwd_dkdvq") : "dev_dkdv") + sfx + (C ? "_causal" : ""), kv,
            nullptr, T::kWarps, T::kSmemBytes};
  if (Q) {
    b.dq_br = fa2::kPreRows;
    b.dq = Fn{"fa2_bwd_dqconv" + sfx, dq, nullptr, fa2::kPreThreads / 32, 0};
  }
  b.kv_bc = T::kBc;
  return b;
}

// Dev-only tiles (not shipped), timed and checked beside the shipped ones:
// X(name, arch, d, Bc, Br, warps, SK, VK, QM, kvregs, minblocks).
#ifndef BWD_DEV_TILES
#define BWD_DEV_TILES(X)
#endif
template <class T, bool C, bool Q, bool Det = false>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) dev_kv(const BwdParams p) {
  fa2::bwd_kv_kernel<T, C, Q, __half, Det>(p);
}
template <class T>
__global__ void __launch_bounds__(fa2::kPreThreads) dev_conv(const BwdParams p) {
  fa2::bwd_dq_convert_kernel<T>(p);
}

static std::vector<Bwd> shipped_tpl() {
  std::vector<Bwd> v;
#define ADD(A, D, ...)                                                                                               \
  v.push_back(make_bwd<A, D, false>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)fa2_bwd_dkdv_sm##A##_d##D, \
                                    (const void*)fa2_bwd_dq_sm##A##_d##D));                                       \
  v.push_back(make_bwd<A, D, true>((const void*)fa2_bwd_pre_sm##A##_d##D,                                        \
                                   (const void*)fa2_bwd_dkdv_sm##A##_d##D##_causal,                             \
                                   (const void*)fa2_bwd_dq_sm##A##_d##D##_causal));
  FA2_BWD_TILES(ADD)
#undef ADD
#define ADDQ(A, D, SIZE, ...)                                                                                              \
  v.push_back(make_kvq<BwdKVQTraits<A, D, FA2_KVQ_LARGE_##SIZE>::nc, false, true>(                                         \
      (const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)FA2_CAT(fa2_bwd_dkdvq_sm##A##_d##D, FA2_KVQ_SFX_##SIZE),        \
      (const void*)FA2_CAT(fa2_bwd_dqconv_sm##A##_d##D, FA2_KVQ_SFX_##SIZE), #SIZE));                                      \
  v.push_back(make_kvq<BwdKVQTraits<A, D, FA2_KVQ_LARGE_##SIZE>::type, true, true>(                                         \
      (const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)FA2_CAT(FA2_CAT(fa2_bwd_dkdvq_sm##A##_d##D, FA2_KVQ_SFX_##SIZE), _causal), \
      (const void*)FA2_CAT(fa2_bwd_dqconv_sm##A##_d##D, FA2_KVQ_SFX_##SIZE), #SIZE));                                      \
  /* the ordered twin (bwd.cu ships it where FA2_KVQ_DET_NC/C say; here every row, both masks) */                       \
  {                                                                                                                        \
    using T = BwdKVQTraits<A, D, FA2_KVQ_LARGE_##SIZE>::type;                                                              \
    using TN = BwdKVQTraits<A, D, FA2_KVQ_LARGE_##SIZE>::nc; /* the non-causal kernels' warp grids */                       \
    const void* conv = (const void*)FA2_CAT(fa2_bwd_dqconv_sm##A##_d##D, FA2_KVQ_SFX_##SIZE);                             \
    v.push_back(make_kvq<TN, false, true>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<TN, false, true, true>, \
                                          conv, #SIZE, true));                                                             \
    v.push_back(make_kvq<T, true, true>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<T, true, true, true>,   \
                                        conv, #SIZE, true));                                                               \
  }
  FA2_BWD_KVQ_TILES(ADDQ)
#undef ADDQ
#define ADDDEV(NAME, A, D, ...)                                                                                    \
  for (int q = 0; q < 2; ++q) {                                                                                    \
    using T = BwdKVQTile<A, D, __VA_ARGS__>;                                                                       \
    const void* conv = (const void*)dev_conv<T>;                                                                    \
    v.push_back(q ? make_kvq<T, false, true>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<T, false, true>, conv, #NAME) \
                  : make_kvq<T, false, false>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<T, false, false>,      \
                                              (const void*)fa2_bwd_dq_sm##A##_d##D, #NAME));                       \
    v.push_back(q ? make_kvq<T, true, true>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<T, true, true>, conv, #NAME) \
                  : make_kvq<T, true, false>((const void*)fa2_bwd_pre_sm##A##_d##D, (const void*)dev_kv<T, true, false>,       \
                                             (const void*)fa2_bwd_dq_sm##A##_d##D##_causal, #NAME));               \
  }
  BWD_DEV_TILES(ADDDEV)
#undef ADDDEV
  return v;
}

// The Turing variants from the compute_75 PTX, JIT-compiled by the driver.
static std::vector<Bwd> shipped_ptx75(const std::string& path) {
  std::vector<Bwd> out;
  std::string img = read_file(path);
  if (img.empty()) {
    std::printf("skip ptx75: cannot read %s\n", path.c_str());
    return out;
  }
  img.push_back('\0');
  CUmodule mod;
  drv.check(drv.ModuleLoadData(&mod, img.data()), path.c_str());
  for (Bwd b : shipped_tpl()) {
    if (b.arch != 75) continue;
    b.src = "ptx75";
    for (Fn* f : {&b.pre, &b.kv, &b.dq}) {
      f->fn = nullptr;
      drv.check(drv.ModuleGetFunction(&f->cf, mod, f->name.c_str()), f->name.c_str());
    }
    out.push_back(b);
  }
  return out;
}

template <int D> static auto fwd_fn() { return D == 64 ? fa2_fwd_sm80_d64 : fa2_fwd_sm80_d128; }
template <int D> static auto fwd_causal_fn() { return D == 64 ? fa2_fwd_sm80_d64_causal : fa2_fwd_sm80_d128_causal; }

// ---- CPU reference ----
static float h2f(__half h) { return __half2float(h); }
static __half f2h(float f) { return __float2half_rn(f); }
static double rh(double x) { return (double)__half2float(__float2half_rn((float)x)); }

struct Shape {
  int b, hq, hkv, nq, nk;
};

// Dense BSHD everywhere; q-like (b, nq, hq, d), kv-like (b, nk, hkv, d).
struct Problem {
  Shape sh;
  int d;
  bool causal;
  std::vector<__half> q, k, v, dout, o;  // o: the fp16-rounded float64 output
  std::vector<float> lse;                // (b, hq, nq), -inf for rows that see no key
  std::vector<double> dq, dk, dv;        // truth
  std::vector<double> dqb, dkb, dvb;     // baseline
  std::vector<char> seen;                // per (b, hq, nq)
  // Largest sum_e |dO_ie v_je| + sum_e |dO_ie O_ie| over visible (i, j): the
  // size of the float32 sums dP and Di that cancel in dS = P (dP - Di).
  double cancel = 0, maxq = 0, maxk = 0;
  size_t qi(int b, int i, int h, int e) const { return (((size_t)b * sh.nq + i) * sh.hq + h) * d + e; }
  size_t ki(int b, int j, int h, int e) const { return (((size_t)b * sh.nk + j) * sh.hkv + h) * d + e; }
};

static void build(Problem& P, uint64_t seed) {
  const Shape& sh = P.sh;
  const int d = P.d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<__half>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = f2h(nd(rng));
  };
  const size_t nq = (size_t)sh.b * sh.nq * sh.hq * d, nk = (size_t)sh.b * sh.nk * sh.hkv * d;
  fill(P.q, nq); fill(P.k, nk); fill(P.v, nk); fill(P.dout, nq);
  P.o.assign(nq, f2h(0.f));
  P.lse.assign((size_t)sh.b * sh.hq * sh.nq, -INFINITY);
  P.seen.assign(P.lse.size(), 0);
  P.dq.assign(nq, 0); P.dqb.assign(nq, 0);
  P.dk.assign(nk, 0); P.dkb.assign(nk, 0);
  P.dv.assign(nk, 0); P.dvb.assign(nk, 0);
  const double scale = 1.0 / std::sqrt((double)d);
  const int groups = sh.hq / sh.hkv;
  std::vector<double> s(sh.nk), o(d), dqa(d), dqba(d);
  for (int b = 0; b < sh.b; ++b)
    for (int h = 0; h < sh.hq; ++h) {
      const int hk = h / groups;
      for (int i = 0; i < sh.nq; ++i) {
        const size_t li = ((size_t)b * sh.hq + h) * sh.nq + i;
        int last = sh.nk - 1;
        if (P.causal) last = std::min(last, i + sh.nk - sh.nq);
        if (last < 0) continue;  // no key: O = 0, LSE = -inf, dQ = 0
        P.seen[li] = 1;
        double mx = -INFINITY;
        for (int j = 0; j <= last; ++j) {
          double acc = 0;
          for (int e = 0; e < d; ++e) acc += (double)h2f(P.q[P.qi(b, i, h, e)]) * h2f(P.k[P.ki(b, j, hk, e)]);
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        double l = 0;
        for (int j = 0; j <= last; ++j) l += std::exp(s[j] - mx);
        const double L = mx + std::log(l);
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j <= last; ++j) {
          const double p = std::exp(s[j] - L);
          for (int e = 0; e < d; ++e) o[e] += p * h2f(P.v[P.ki(b, j, hk, e)]);
        }
        for (int e = 0; e < d; ++e) P.o[P.qi(b, i, h, e)] = f2h((float)o[e]);
        P.lse[li] = (float)L;
        // Backward of this row. Truth: exact O and L. Baseline: fp16 O, float L,
        // Di and dP summed in float32 in opposite orders (as attntest: where P is
        // near 1 dP cancels Di, and one order for both would cancel their
        // rounding too: with Nk = 1 the baseline would be exact, the GPU not).
        double Di = 0, Dabs = 0;
        float Dib = 0;
        for (int e = 0; e < d; ++e) {
          const double g = h2f(P.dout[P.qi(b, i, h, e)]);
          Di += g * o[e];
          Dabs += std::fabs(g * o[e]);
          Dib += (float)g * h2f(P.o[P.qi(b, i, h, e)]);
          P.maxq = std::max(P.maxq, (double)std::fabs(h2f(P.q[P.qi(b, i, h, e)])));
        }
        std::fill(dqa.begin(), dqa.end(), 0.0);
        std::fill(dqba.begin(), dqba.end(), 0.0);
        for (int j = 0; j <= last; ++j) {
          double dp = 0;
          float dpb = 0;
          double dpabs = 0;
          for (int e = 0; e < d; ++e) {
            dp += (double)h2f(P.dout[P.qi(b, i, h, e)]) * h2f(P.v[P.ki(b, j, hk, e)]);
            dpabs += std::fabs((double)h2f(P.dout[P.qi(b, i, h, e)]) * h2f(P.v[P.ki(b, j, hk, e)]));
            P.maxk = std::max(P.maxk, (double)std::fabs(h2f(P.k[P.ki(b, j, hk, e)])));
          }
          P.cancel = std::max(P.cancel, dpabs + Dabs);
          for (int e = d - 1; e >= 0; --e) dpb += h2f(P.dout[P.qi(b, i, h, e)]) * h2f(P.v[P.ki(b, j, hk, e)]);
          const double p = std::exp(s[j] - L), pb = std::exp(s[j] - (double)P.lse[li]);
          const double ds = p * (dp - Di), dsb = rh(pb * ((double)dpb - (double)Dib)), pr = rh(pb);
          for (int e = 0; e < d; ++e) {
            const double kj = h2f(P.k[P.ki(b, j, hk, e)]), qe = h2f(P.q[P.qi(b, i, h, e)]);
            const double ge = h2f(P.dout[P.qi(b, i, h, e)]);
            dqa[e] += ds * kj;
            dqba[e] += dsb * kj;
            P.dk[P.ki(b, j, hk, e)] += ds * qe;
            P.dkb[P.ki(b, j, hk, e)] += dsb * qe;
            P.dv[P.ki(b, j, hk, e)] += p * ge;
            P.dvb[P.ki(b, j, hk, e)] += pr * ge;
          }
        }
        for (int e = 0; e < d; ++e) {
          P.dq[P.qi(b, i, h, e)] = scale * dqa[e];
          P.dqb[P.qi(b, i, h, e)] = rh(scale * dqba[e]);
        }
      }
    }
  for (size_t x = 0; x < nk; ++x) {
    P.dk[x] *= scale;
    P.dkb[x] = rh(P.dkb[x] * scale);
    P.dvb[x] = rh(P.dvb[x]);
  }
}

// ---- GPU run and comparison ----
static const int kGuard = 1024;  // poisoned fp16 values after each output

struct Out {
  std::vector<__half> dq, dk, dv;
};

static Out run_gpu(const Bwd& bw, const Problem& P) {
  const Shape& sh = P.sh;
  const int d = P.d;
  const size_t nq = P.q.size(), nk = P.k.size(), nl = P.lse.size();
  __half *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse, *di, *acc;
  CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&k, nk * 2)); CK(cudaMalloc(&v, nk * 2));
  // Rows padded to any Br <= 128, and the deterministic path's counters (at most one per row).
  const size_t nacc = (size_t)sh.b * sh.hq * ((sh.nq + 127) / 128 * 128) * (d + 1);
  CK(cudaMalloc(&acc, nacc * 4));
  CK(cudaMemset(acc, 0xff, nacc * 4));  // NaN: the pre kernel must zero the fused path's floats
  CK(cudaMalloc(&o, nq * 2)); CK(cudaMalloc(&dout, nq * 2));
  CK(cudaMalloc(&dq, (nq + kGuard) * 2)); CK(cudaMalloc(&dk, (nk + kGuard) * 2)); CK(cudaMalloc(&dv, (nk + kGuard) * 2));
  CK(cudaMalloc(&lse, nl * 4)); CK(cudaMalloc(&di, nl * 4));
  CK(cudaMemcpy(q, P.q.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(k, P.k.data(), nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(v, P.v.data(), nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(o, P.o.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dout, P.dout.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(lse, P.lse.data(), nl * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dq, 0xff, (nq + kGuard) * 2));  // fp16 NaN
  CK(cudaMemset(dk, 0xff, (nk + kGuard) * 2));
  CK(cudaMemset(dv, 0xff, (nk + kGuard) * 2));
  CK(cudaMemset(di, 0xff, nl * 4));
  BwdParams p{};
  p.q = q; p.k = k; p.v = v; p.o = o; p.dout = dout; p.lse = lse; p.di = di; p.dq = dq; p.dk = dk; p.dv = dv;
  p.dq_accum = acc;
  const int64_t qb = (int64_t)sh.nq * sh.hq * d, qr = (int64_t)sh.hq * d, kb = (int64_t)sh.nk * sh.hkv * d,
                kr = (int64_t)sh.hkv * d;
  p.q_batch_stride = p.o_batch_stride = p.do_batch_stride = p.dq_batch_stride = qb;
  p.q_row_stride = p.o_row_stride = p.do_row_stride = p.dq_row_stride = qr;
  p.q_head_stride = p.o_head_stride = p.do_head_stride = p.dq_head_stride = d;
  p.k_batch_stride = p.v_batch_stride = p.dk_batch_stride = p.dv_batch_stride = kb;
  p.k_row_stride = p.v_row_stride = p.dk_row_stride = p.dv_row_stride = kr;
  p.k_head_stride = p.v_head_stride = p.dk_head_stride = p.dv_head_stride = d;
  p.b = sh.b; p.nq = sh.nq; p.nk = sh.nk; p.hq = sh.hq; p.hkv = sh.hkv; p.d = d;
  p.scale = 1.f / std::sqrt((float)d);
  p.scale_log2 = p.scale * 1.4426950408889634f;
  bw.run(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  Out r;
  r.dq.resize(nq + kGuard); r.dk.resize(nk + kGuard); r.dv.resize(nk + kGuard);
  CK(cudaMemcpy(r.dq.data(), dq, r.dq.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.dk.data(), dk, r.dk.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.dv.data(), dv, r.dv.size() * 2, cudaMemcpyDeviceToHost));
  for (void* x : {(void*)q, (void*)k, (void*)v, (void*)o, (void*)dout, (void*)dq, (void*)dk, (void*)dv, (void*)lse, (void*)di,
                  (void*)acc})
    CK(cudaFree(x));
  return r;
}

// Compares one gradient; returns ok and prints details on failure.
static bool compare(const char* what, const std::vector<__half>& got, const std::vector<double>& truth,
                    const std::vector<double>& base, int rowlen_heads, int n, int d, double floor32, std::string& msg) {
  double err = 0, eb = 0, mx = 0;
  size_t arg = 0;
  long bad = 0, guard = 0;
  for (size_t x = 0; x < truth.size(); ++x) {
    const float g = h2f(got[x]);
    if (!std::isfinite(g)) ++bad;
    const double e = std::fabs(g - truth[x]);
    if (e > err || !std::isfinite(g)) { err = std::isfinite(g) ? e : INFINITY; arg = x; }
    eb = std::max(eb, std::fabs(base[x] - truth[x]));
    mx = std::max(mx, std::fabs(truth[x]));
  }
  for (int gI = 0; gI < kGuard; ++gI) {
    uint16_t bits;
    std::memcpy(&bits, &got[truth.size() + gI], 2);
    if (bits != 0xffff) ++guard;
  }
  const double floor = 4 * std::ldexp(1.0, -11) * mx + floor32;
  const bool ok = bad == 0 && guard == 0 && err <= 2 * eb + floor;
  char b[400];
  // arg = ((b*n + row)*heads + h)*d + e
  const int e = arg % d, h = (arg / d) % rowlen_heads, row = (arg / d / rowlen_heads) % n,
            bb = arg / d / rowlen_heads / n;
  std::snprintf(b, sizeof b, " %s err %.3g (base %.3g, %.2fx, max|truth| %.3g) at [b%d n%d h%d e%d] got %.5g want %.5g%s%s",
                what, err, eb, eb > 0 ? err / eb : 0.0, mx, bb, row, h, e, h2f(got[arg]), truth[arg],
                bad ? " NONFINITE/UNWRITTEN" : "", guard ? " GUARD-OVERWRITTEN" : "");
  msg += b;
  return ok;
}

// BWD_ONLY=sm80_d64 checks (and benches) the variants whose source and name
// contain it, or one of a|b.
static bool selected(const Bwd& bw) {
  const char* only = std::getenv("BWD_ONLY");
  if (!only) return true;
  std::stringstream alts(only);
  for (std::string a; std::getline(alts, a, '|');)
    if ((bw.src + " " + bw.name()).find(a) != std::string::npos) return true;
  return false;
}

// BWD_BENCH=1: times every tpl80 backward on the FA2 paper shapes at N 2048 and
// 8192 (B = 16384/N, H = 2048/D, D 64 and 128) on random data, O and LSE from the
// shipped forward kernel: median of 20 CUDA-event-timed calls after 3 warm-ups,
// the whole call and each kernel. For tile tuning and ncu; the figures beside
// PyTorch come from sidebyside.py --bwd.
template <int D, bool C>
static void fwd_launch(const BwdParams& b) {
  using T = typename FwdTraits<80, D>::type;
  FwdParams f{};
  f.q = b.q; f.k = b.k; f.v = b.v; f.o = const_cast<void*>(b.o); f.lse = const_cast<float*>(b.lse);
  f.q_batch_stride = b.q_batch_stride; f.q_row_stride = b.q_row_stride; f.q_head_stride = b.q_head_stride;
  f.k_batch_stride = b.k_batch_stride; f.k_row_stride = b.k_row_stride; f.k_head_stride = b.k_head_stride;
  f.v_batch_stride = b.v_batch_stride; f.v_row_stride = b.v_row_stride; f.v_head_stride = b.v_head_stride;
  f.o_batch_stride = b.o_batch_stride; f.o_row_stride = b.o_row_stride; f.o_head_stride = b.o_head_stride;
  f.b = b.b; f.nq = b.nq; f.nk = b.nk; f.hq = b.hq; f.hkv = b.hkv; f.d = b.d; f.scale = b.scale; f.scale_log2 = b.scale_log2;
  const void* fn = C ? (const void*)fwd_causal_fn<D>() : (const void*)fwd_fn<D>();
  if (T::kSmemBytes > 48 * 1024) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  void* args[] = {&f};
  CK(cudaLaunchKernel(fn, dim3((b.nq + T::kBr - 1) / T::kBr, b.b * b.hq), dim3(T::kThreads), args, T::kSmemBytes, 0));
}

static int bench(const std::vector<Bwd>& all) {
  for (int d : {64, 128})
    for (int causal = 0; causal < 2; ++causal)
      for (int n : {2048, 8192}) {
        const int b = 16384 / n, h = 2048 / d;
        const size_t nel = (size_t)b * n * h * d, nl = (size_t)b * h * n;
        std::vector<__half> hx(nel);
        std::mt19937 rng(n + d);
        std::normal_distribution<float> nd;
        for (auto& x : hx) x = f2h(nd(rng));
        __half *q, *k, *v, *o, *dout, *dq, *dk, *dv;
        float *lse, *di, *acc;
        for (__half** x : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) CK(cudaMalloc(x, nel * 2));
        CK(cudaMalloc(&acc, (nel + nl) * 4));  // and the deterministic path's counters (at most one per row)
        for (__half* x : {q, k, v, dout}) CK(cudaMemcpy(x, hx.data(), nel * 2, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&lse, nl * 4)); CK(cudaMalloc(&di, nl * 4));
        BwdParams p{};
        p.q = q; p.k = k; p.v = v; p.o = o; p.dout = dout; p.lse = lse; p.di = di; p.dq = dq; p.dk = dk; p.dv = dv;
        p.dq_accum = acc;
        const int64_t bs = (int64_t)n * h * d, rs = (int64_t)h * d;
        p.q_batch_stride = p.o_batch_stride = p.do_batch_stride = p.dq_batch_stride = bs;
        p.k_batch_stride = p.v_batch_stride = p.dk_batch_stride = p.dv_batch_stride = bs;
        p.q_row_stride = p.o_row_stride = p.do_row_stride = p.dq_row_stride = rs;
        p.k_row_stride = p.v_row_stride = p.dk_row_stride = p.dv_row_stride = rs;
        p.q_head_stride = p.o_head_stride = p.do_head_stride = p.dq_head_stride = d;
        p.k_head_stride = p.v_head_stride = p.dk_head_stride = p.dv_head_stride = d;
        p.b = b; p.nq = n; p.nk = n; p.hq = h; p.hkv = h; p.d = d;
        p.scale = 1.f / std::sqrt((float)d);
        p.scale_log2 = p.scale * 1.4426950408889634f;
        if (d == 64) causal ? fwd_launch<64, true>(p) : fwd_launch<64, false>(p);
        else causal ? fwd_launch<128, true>(p) : fwd_launch<128, false>(p);
        const double flops = 2.5 * 4.0 * b * h * (double)n * n * d / (causal ? 2 : 1);
        for (const Bwd& bw : all) {
          if (bw.src != "tpl80" || bw.d != d || bw.causal != causal || !selected(bw)) continue;
          cudaEvent_t ev[4];
          for (auto& e : ev) CK(cudaEventCreate(&e));
          std::vector<float> ms[4];  // whole call, pre, dK/dV, dQ
          for (int r = 0; r < 23; ++r) {
            bw.run(p, ev);
            CK(cudaEventSynchronize(ev[3]));
            float t[4];
            CK(cudaEventElapsedTime(&t[0], ev[0], ev[3]));
            for (int k = 1; k < 4; ++k) CK(cudaEventElapsedTime(&t[k], ev[k - 1], ev[k]));
            if (r >= 3)
              for (int k = 0; k < 4; ++k) ms[k].push_back(t[k]);
          }
          float med[4];
          for (int k = 0; k < 4; ++k) {
            std::sort(ms[k].begin(), ms[k].end());
            med[k] = ms[k][ms[k].size() / 2];
          }
          std::printf("bench %-26s N%-5d %8.3f ms %6.1f TFLOP/s  (pre %.3f, dkdv %.3f, dq %.3f ms; fused: dq = convert)\n", bw.name().c_str(), n, med[0],
                      flops / (med[0] * 1e-3) / 1e12, med[1], med[2], med[3]);
          std::fflush(stdout);
          for (auto& e : ev) CK(cudaEventDestroy(e));
        }
        for (void* x : {(void*)q, (void*)k, (void*)v, (void*)o, (void*)dout, (void*)dq, (void*)dk, (void*)dv, (void*)lse, (void*)di,
                        (void*)acc})
          CK(cudaFree(x));
      }
  return 0;
}

static const std::vector<Shape> kShapes = {
    {1, 1, 1, 1, 1},     {2, 3, 3, 17, 17},   {1, 4, 2, 97, 97},  {1, 2, 1, 200, 77},   {1, 2, 2, 77, 200},
    {2, 6, 2, 1, 130},   {1, 1, 1, 300, 1},   {1, 8, 1, 129, 255}, {1, 2, 1, 513, 513},
};

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "internal/kernels";
  CK(cudaFree(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s sm_%d%d, CUDA runtime %d\n", prop.name, prop.major, prop.minor, CUDART_VERSION);
  std::vector<Bwd> all = shipped_tpl();
  if (drv.load()) {
    std::vector<Bwd> ptx = shipped_ptx75(dir + "/fa2_bwd_ptx75.fatbin");
    all.insert(all.end(), ptx.begin(), ptx.end());
  }
  for (const Bwd& b : all)
    for (const Fn* f : {&b.pre, &b.kv, &b.dq}) f->prepare();
  if (std::getenv("BWD_BENCH")) return bench(all);

  std::map<std::string, Problem> cache;
  std::map<std::string, int> pass, cases;
  int failed = 0;
  for (const Bwd& bw : all) {
    if (!selected(bw)) continue;
    for (size_t si = 0; si < kShapes.size(); ++si) {
      // BWD_SHAPES=1,3,7 checks those shapes only (for compute-sanitizer runs).
      if (const char* only = std::getenv("BWD_SHAPES"))
        if (("," + std::string(only) + ",").find("," + std::to_string(si) + ",") == std::string::npos) continue;
      const Shape& sh = kShapes[si];
      const std::string key = std::to_string(si) + "/" + std::to_string(bw.d) + (bw.causal ? "c" : "n");
      if (!cache.count(key)) {
        Problem P;
        P.sh = sh; P.d = bw.d; P.causal = bw.causal;
        build(P, 7000 + 31 * si + bw.d);
        cache.emplace(key, std::move(P));
      }
      const Problem& P = cache.at(key);
      const Out r = run_gpu(bw, P);
      std::string msg;
      // dS's float32 cancellation, first order: 4 unit roundoffs of the sums
      // that cancel, times scale and the largest |k| (dQ) or |q| (dK). It
      // decides only where the truth is ~0 (Nk = 1: dQ = dK = 0 exactly).
      const double u32 = std::ldexp(1.0, -24), sc = 1.0 / std::sqrt((double)bw.d);
      bool ok = compare("dQ", r.dq, P.dq, P.dqb, sh.hq, sh.nq, bw.d, 4 * u32 * P.cancel * sc * P.maxk, msg);
      ok = compare("dK", r.dk, P.dk, P.dkb, sh.hkv, sh.nk, bw.d, 4 * u32 * P.cancel * sc * P.maxq, msg) && ok;
      ok = compare("dV", r.dv, P.dv, P.dvb, sh.hkv, sh.nk, bw.d, 0, msg) && ok;
      long zero_bad = 0;  // rows that see no key: dQ exactly 0
      for (size_t li = 0; li < P.seen.size(); ++li) {
        if (P.seen[li]) continue;
        const int i = li % sh.nq, h = (li / sh.nq) % sh.hq, b = li / ((size_t)sh.nq * sh.hq);
        for (int e = 0; e < bw.d; ++e)
          if (h2f(r.dq[P.qi(b, i, h, e)]) != 0.f) ++zero_bad;
      }
      if (zero_bad) { ok = false; msg += " NONZERO-dQ-OF-UNSEEING-ROWS"; }
      const Out r2 = run_gpu(bw, P);  // bit-reproducible
      // The single pass adds dQ with atomics in no fixed order (unless det): only dK and dV must repeat.
      if (((!bw.fused || bw.det) && std::memcmp(r.dq.data(), r2.dq.data(), P.dq.size() * 2)) ||
          std::memcmp(r.dk.data(), r2.dk.data(), P.dk.size() * 2) ||
          std::memcmp(r.dv.data(), r2.dv.data(), P.dv.size() * 2)) {
        ok = false;
        msg += " NOT-DETERMINISTIC";
      }
      ++cases[bw.src];
      if (ok) ++pass[bw.src];
      else ++failed;
      std::printf("%s %-6s %-26s B%d Hq%d Hkv%d Nq%-4d Nk%-4d%s\n", ok ? "ok  " : "FAIL", bw.src.c_str(), bw.name().c_str(), sh.b,
                  sh.hq, sh.hkv, sh.nq, sh.nk, msg.c_str());
      std::fflush(stdout);
    }
  }
  for (auto& c : cases) std::printf("check %-6s: %d/%d cases pass\n", c.first.c_str(), pass[c.first], c.second);
  std::printf("%s\n", failed ? "CHECK FAILED" : "all checks passed");
  return failed ? 1 : 0;
}
