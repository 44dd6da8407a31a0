// fwd_check.cu: dev harness for the FA2 forward kernels (llm.c dev/cuda style):
// CPU reference check of every shipped variant, a tuning sweep of candidate tiles,
// and a benchmark over the FA2 paper's shapes.
//
// Build and run on a GPU machine, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -DFA2_TUNE kernels/dev/fwd_check.cu -o .build/fwd_check -ldl
//   .build/fwd_check all internal/kernels     # check | tune | bench | all | ladder | ladder-check
// The Hopper forward (fa2_sm90a.cu): build with nvcc 12+ (kernels/cuda12.sh)
// for sm_90a and -DFA2_SM90A, then mode sm90a (check of its kernels as compiled
// here and from the committed fa2_sm90a.cubin, then timed beside the fatbin's
// sm_80 kernels of the same head dims on the paper shapes; sm90a-check: no timing):
//   $(kernels/cuda12.sh) -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DFA2_SM90A kernels/dev/fwd_check.cu -o .build/fwd_check90a -ldl
//   .build/fwd_check90a sm90a internal/kernels [NAME=cand.cubin,D:Br:Bc:stages,...]...
// (candidate cubins of other tiles or code, built with the same nvcc -cubin line
// as build.sh's, checked and timed beside them)
// Kernel sources compared in one process: "tpl" = compiled into this binary by
// the local nvcc; "fatbin" = the committed internal/kernels/fa2_fwd.fatbin (nvcc 11.8
// SASS; the ladder's: fa2_ladder.fatbin), loaded with cuModuleLoadData; "ptx75" =
// internal/kernels/fa2_fwd_ptx75.fatbin (fa2_ladder_ptx75.fatbin), the Turing
// kernels JIT-compiled by the driver (how Go forces the sm_75 path).
//
// Correctness rule (as FA2's tests): float64 CPU attention on the fp16 inputs is
// the truth; a CPU result with fp16 rounding of S, P and O is the baseline; the GPU's
// max error on O and on LSE must be <= 2x the baseline's. Outputs are NaN-poisoned
// first, with guard words after them; rows that see no key need O = 0, LSE = -inf.
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
#include <thread>
#include <vector>

#include "../fwd.cu"
#include "../ladder.cu"
#include "dev.h"
#ifdef FA2_SM90A
#include "../fa2_sm90a.cu"
#endif

// A persistent kernel's CTAs: the device's SMs when timed, fewer (5) when
// checked, so that the small check shapes still give each CTA several tiles.
static unsigned g_sms = 1;

#ifdef FA2_SM90A
// The Hopper forward's argument for FwdParams p (what flashattn's sm90Args does
// in Go): q, k, v as dev.h's tensor maps with the strides p gives (BSHD and
// BHSD K/V alike), boxes of 64 (Q) or bc (K, V) rows.
static CUresult sm90_args(const FwdParams& p, int bc, Sm90FwdArgs* out) {
  out->p = p;
  CUresult r = tensor_map16(out->q_map, false, p.q, p.d, p.nq, p.hq, p.b, p.q_row_stride, p.q_head_stride, p.q_batch_stride, 64);
  if (r == CUDA_SUCCESS)
    r = tensor_map16(out->k_map, false, p.k, p.d, p.nk, p.hkv, p.b, p.k_row_stride, p.k_head_stride, p.k_batch_stride, bc);
  if (r == CUDA_SUCCESS)
    r = tensor_map16(out->v_map, false, p.v, p.d, p.nk, p.hkv, p.b, p.v_row_stride, p.v_head_stride, p.v_batch_stride, bc);
  return r;
}
#endif

// ---- kernels ----
struct Kernel {
  std::string name, src;
  int arch, d, br, bc, warps, stages, splits, smem;
  bool causal, qregs;
  const void* fn = nullptr;  // runtime API
  CUfunction cf = nullptr;   // driver API
  bool tma = false;          // fa2_sm90a.cu: the parameter is Sm90FwdArgs (tensor maps + FwdParams)
  bool persist = false;      // a persistent kernel: one CTA per SM walks the tiles
  int per_sm = 1;            // persistent: CTAs per SM
  void prepare() {
    if (fn) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    else drv.check(drv.FuncSetAttribute(cf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), name.c_str());
  }
  void launch(const FwdParams& p) const {
    FwdParams pp = p;
    void* args[] = {&pp};
    unsigned gx = (p.nq + br - 1) / br, gy = p.b * p.hq;
    if (persist) gx = std::min<unsigned>(gx * gy, g_sms * per_sm), gy = 1;
#ifdef FA2_SM90A
    if (tma) {
      Sm90FwdArgs wa;
      drv.check(sm90_args(p, bc, &wa), name.c_str());
      void* wargs[] = {&wa};
      if (fn) CK(cudaLaunchKernel(fn, dim3(gx, gy), dim3(warps * 32), wargs, smem, 0));
      else drv.check(drv.LaunchKernel(cf, gx, gy, 1, warps * 32, 1, 1, smem, 0, wargs, nullptr), name.c_str());
      return;
    }
#endif
    if (fn) CK(cudaLaunchKernel(fn, dim3(gx, gy), dim3(warps * 32), args, smem, 0));
    else drv.check(drv.LaunchKernel(cf, gx, gy, 1, warps * 32, 1, 1, smem, 0, args, nullptr), name.c_str());
  }
  std::string tile() const {
    char b[96];
    if (arch == 0) std::snprintf(b, sizeof b, "%dx%d w%d rung%d", br, bc, warps, stages);  // a ladder rung
    else std::snprintf(b, sizeof b, "%dx%d w%d st%d sp%d%s", br, bc, warps, stages, splits, qregs ? " qreg" : "");
    return b;
  }
};

template <class T, bool C>
Kernel make_kernel(const std::string& name, const std::string& src, const void* fn) {
  Kernel k;
  k.name = name;
  k.src = src;
  k.arch = T::kArch; k.d = T::kD; k.br = T::kBr; k.bc = T::kBc; k.warps = T::kWarps;
  k.stages = T::kStages; k.splits = T::kSplits; k.smem = T::kSmemBytes; k.causal = C; k.qregs = T::kQRegs;
  k.fn = fn;
  return k;
}

static std::vector<Kernel> shipped_tpl() {
  std::vector<Kernel> v;
#define ADD(A, D, ...)                                                                                                \
  v.push_back(make_kernel<FwdTraits<A, D>::type, false>("fa2_fwd_sm" #A "_d" #D, "tpl", (const void*)fa2_fwd_sm##A##_d##D)); \
  v.push_back(make_kernel<FwdTraits<A, D>::type, true>("fa2_fwd_sm" #A "_d" #D "_causal", "tpl",                   \
                                                        (const void*)fa2_fwd_sm##A##_d##D##_causal));
  FA2_FWD_TILES(ADD)
#undef ADD
  return v;
}

// The kernel ladder's rungs 1-4 (ladder/ladder.cuh): arch 0, both paths run them.
template <class R, int D, bool C>
Kernel make_rung(int rung, const std::string& name, const void* fn) {
  Kernel k{};
  k.name = name;
  k.src = "tpl";
  k.arch = 0; k.d = D; k.br = R::kBr; k.bc = R::kBc; k.warps = R::kThreads / 32;
  k.stages = k.splits = rung;  // tile() shows it
  k.smem = 0; k.causal = C; k.qregs = false;
  k.fn = fn;
  return k;
}

static std::vector<Kernel> ladder_tpl() {
  std::vector<Kernel> v;
#define ADDL(R, D)                                                                                          \
  v.push_back(make_rung<fa2::ladder::Rung##R, D, false>(R, "fa2_ladder" #R "_d" #D, (const void*)fa2_ladder##R##_d##D)); \
  v.push_back(make_rung<fa2::ladder::Rung##R, D, true>(R, "fa2_ladder" #R "_d" #D "_causal",                  \
                                                      (const void*)fa2_ladder##R##_d##D##_causal));
  FA2_LADDER(ADDL)
#undef ADDL
  return v;
}

// Same table (the shipped kernels, or with ladder the ladder's), functions from
// a module image (fatbin or PTX) loaded by the driver.
static std::vector<Kernel> shipped_module(const std::string& path, const std::string& src, int only_arch,
                                          bool ladder = false) {
  std::vector<Kernel> out;
  std::string img = read_file(path);
  if (img.empty()) {
    std::printf("skip %s: cannot read %s\n", src.c_str(), path.c_str());
    return out;
  }
  img.push_back('\0');  // PTX must be NUL-terminated
  CUmodule mod;
  drv.check(drv.ModuleLoadData(&mod, img.data()), path.c_str());
  for (Kernel k : ladder ? ladder_tpl() : shipped_tpl()) {
    if (only_arch && k.arch != 0 && k.arch != only_arch) continue;
    k.src = src;
    k.fn = nullptr;
    drv.check(drv.ModuleGetFunction(&k.cf, mod, k.name.c_str()), k.name.c_str());
    out.push_back(k);
  }
  return out;
}

#ifdef FA2_SM90A
// The Hopper forward (fa2_sm90a.cu): as compiled here, or (cubin) the
// committed fa2_sm90a.cubin's functions, loaded by the driver.
static std::vector<Kernel> sm90a_tpl() {
  std::vector<Kernel> v;
#define ADD90(D, ...)                                                                                           \
  v.push_back(make_kernel<Sm90Traits<D>::type, false>("fa2_fwd_sm90a_d" #D, "tpl", (const void*)fa2_fwd_sm90a_d##D)); \
  v.push_back(make_kernel<Sm90Traits<D>::type, true>("fa2_fwd_sm90a_d" #D "_causal", "tpl",                     \
                                                       (const void*)fa2_fwd_sm90a_d##D##_causal));
  FA2_SM90A_TILES(ADD90)
#undef ADD90
  for (Kernel& k : v) k.tma = true, k.persist = Sm90Traits<64>::type::kPersistent;
  return v;
}
static std::vector<Kernel> sm90a_cubin(const std::string& path, const std::string& src = "cubin",
                                       std::vector<Kernel> ks = sm90a_tpl()) {
  std::vector<Kernel> out;
  const std::string img = read_file(path);
  if (img.empty()) {
    std::printf("skip %s: cannot read %s\n", src.c_str(), path.c_str());
    return out;
  }
  CUmodule mod;
  drv.check(drv.ModuleLoadData(&mod, img.data()), path.c_str());
  for (Kernel k : ks) {
    k.src = src;
    k.fn = nullptr;
    drv.check(drv.ModuleGetFunction(&k.cf, mod, k.name.c_str()), k.name.c_str());
    out.push_back(k);
  }
  return out;
}
// A candidate cubin of other tiles: "NAME=PATH,D:Br:Bc:stages[:n|:o|:2][,D:Br:Bc:stages...]"
// (one group per head dim it holds; sizes as traits.cuh's Tile90 derives them;
// persistent as the shipped kernels, or under :n one CTA per tile: a cubin of
// non-persistent kernels; :o O staged through shared memory; :2 two CTAs per SM).
static std::vector<Kernel> sm90a_candidate(const std::string& arg) {
  const size_t eq = arg.find('=');
  std::stringstream ss(arg.substr(eq + 1));
  std::string path, tile;
  std::getline(ss, path, ',');
  std::vector<Kernel> ks;
  while (std::getline(ss, tile, ',')) {
    int d, br, bc, st;
    char flag = 0;
    if (std::sscanf(tile.c_str(), "%d:%d:%d:%d:%c", &d, &br, &bc, &st, &flag) < 4) continue;
    for (int causal = 0; causal < 2; ++causal) {
      Kernel k{};
      k.name = "fa2_fwd_sm90a_d" + std::to_string(d) + (causal ? "_causal" : "");
      k.arch = 90; k.d = d; k.br = br; k.bc = bc; k.warps = 4 * (br / 64 + 1); k.stages = st; k.splits = 1;
      k.smem = (br / 64) * 64 * d * 2 + 2 * st * bc * d * 2 + 8 * (2 + 4 * st) + 4 * 128 * (br / 64) +
               (flag == 'o' ? (br / 64) * 64 * d * 2 : 0);
      k.causal = causal; k.tma = true; k.persist = flag != 'n'; k.per_sm = flag == '2' ? 2 : 1;
      ks.push_back(k);
    }
  }
  return sm90a_cubin(path, arg.substr(0, eq), ks);
}
#endif

#ifdef FA2_TUNE
// Candidate tiles for the sm_80 rows of traits.cuh (D 64 and 128 decide the target).
#define CANDIDATES(X)                     \
  X(80, 64, 128, 64, 4, 2, 1, false, 1)   \
  X(80, 64, 128, 64, 4, 2, 1, true, 1)    \
  X(80, 64, 128, 128, 4, 2, 2, false, 1)  \
  X(80, 64, 128, 128, 4, 2, 2, true, 1)   \
  X(80, 128, 128, 64, 4, 2, 2, false, 1)  \
  X(80, 128, 128, 32, 4, 2, 1, false, 1)  \
  X(80, 128, 128, 64, 4, 2, 1, false, 1)  \
  X(80, 32, 128, 128, 4, 2, 2, true, 1)   \
  X(80, 32, 128, 64, 4, 2, 1, true, 1)    \
  X(80, 96, 128, 64, 4, 2, 2, false, 1)   \
  X(80, 96, 128, 64, 4, 2, 1, false, 1)   \
  X(80, 256, 64, 64, 4, 1, 1, false, 1)
static std::vector<Kernel> candidates() {
  std::vector<Kernel> v;
#define ADDC(A, D, BR, BC, W, S, SP, QR, MB)                                                               \
  {                                                                                                        \
    using T = Tile<A, D, BR, BC, W, S, SP, QR, MB>;                                                        \
    char nm[96];                                                                                           \
    std::snprintf(nm, sizeof nm, "cand_d%d_%dx%d_w%d_st%d_sp%d%s_mb%d", D, BR, BC, W, S, SP, QR ? "_qreg" : "", MB); \
    v.push_back(make_kernel<T, false>(nm, "tpl", (const void*)fa2::fwd_tpl<T, false>));                   \
    v.push_back(make_kernel<T, true>(std::string(nm) + "_causal", "tpl", (const void*)fa2::fwd_tpl<T, true>)); \
  }
  CANDIDATES(ADDC)
#undef ADDC
  return v;
}
#endif

// ---- host data ----
static float h2f(__half h) { return __half2float(h); }
static __half f2h(float f) { return __float2half_rn(f); }
static double rh(double x) { return (double)__half2float(__float2half_rn((float)x)); }  // round to fp16

struct Shape {
  int b, hq, hkv, nq, nk;
  bool kv_bhsd;  // K/V stored (B, H, S, D) instead of BSHD: exercises the strides
};

struct Strides {
  int64_t b, s, h;
};

struct Ref {
  std::vector<double> o, lse, o_base, lse_base;  // o: (b, nq, hq, d); lse: (b, hq, nq)
  std::vector<char> seen;                        // per (b, hq, nq): row sees >= 1 key
};

static void cpu_attention(const Shape& sh, int d, bool causal, const std::vector<__half>& q, Strides qs,
                          const std::vector<__half>& k, const std::vector<__half>& v, Strides kvs, Ref& r) {
  const double scale = 1.0 / std::sqrt((double)d);
  const size_t rows = (size_t)sh.b * sh.hq * sh.nq;
  r.o.assign(rows * d, 0);
  r.o_base.assign(rows * d, 0);
  r.lse.assign(rows, 0);
  r.lse_base.assign(rows, 0);
  r.seen.assign(rows, 0);
  auto work = [&](size_t lo, size_t hi) {
    std::vector<double> s(sh.nk), sb(sh.nk);
    for (size_t row = lo; row < hi; ++row) {
      const int i = row % sh.nq, h = (row / sh.nq) % sh.hq, b = row / ((size_t)sh.nq * sh.hq);
      const int hk = h / (sh.hq / sh.hkv);
      const __half* qp = &q[b * qs.b + i * qs.s + h * qs.h];
      int last = sh.nk - 1;
      if (causal) last = std::min(last, i + sh.nk - sh.nq);
      double* o = &r.o[(((size_t)b * sh.nq + i) * sh.hq + h) * d];
      double* ob = &r.o_base[(((size_t)b * sh.nq + i) * sh.hq + h) * d];
      const size_t li = ((size_t)b * sh.hq + h) * sh.nq + i;
      if (last < 0) {
        r.lse[li] = r.lse_base[li] = -INFINITY;
        continue;
      }
      r.seen[li] = 1;
      double mx = -INFINITY, mxb = -INFINITY;
      for (int j = 0; j <= last; ++j) {
        const __half* kp = &k[b * kvs.b + j * kvs.s + hk * kvs.h];
        double acc = 0;
        for (int e = 0; e < d; ++e) acc += (double)h2f(qp[e]) * h2f(kp[e]);
        s[j] = acc * scale;
        sb[j] = rh(acc * scale);
        mx = std::max(mx, s[j]);
        mxb = std::max(mxb, sb[j]);
      }
      double l = 0, lb = 0;
      for (int j = 0; j <= last; ++j) {
        s[j] = std::exp(s[j] - mx);
        l += s[j];
        sb[j] = std::exp(sb[j] - mxb);
        lb += sb[j];
      }
      for (int j = 0; j <= last; ++j) sb[j] = rh(sb[j] / lb);  // P in fp16, as an fp16 framework would
      for (int j = 0; j <= last; ++j) {
        const __half* vp = &v[b * kvs.b + j * kvs.s + hk * kvs.h];
        const double p = s[j] / l, pb = sb[j];
        for (int e = 0; e < d; ++e) {
          o[e] += p * h2f(vp[e]);
          ob[e] += pb * h2f(vp[e]);
        }
      }
      for (int e = 0; e < d; ++e) ob[e] = rh(ob[e]);
      r.lse[li] = mx + std::log(l);
      r.lse_base[li] = mxb + std::log(lb);
    }
  };
  const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> th;
  for (unsigned t = 0; t < nt; ++t) th.emplace_back(work, rows * t / nt, rows * (t + 1) / nt);
  for (auto& t : th) t.join();
}

static void fill_normal(std::vector<__half>& x, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& e : x) e = f2h(nd(rng));
}

// ---- correctness ----
struct CheckStats {
  int cases = 0, failed = 0;
};

static const int kGuard = 4096;  // poisoned words after each output

static bool check_case(const Kernel& kern, const Shape& sh, std::map<std::string, Ref>& cache,
                       std::vector<__half>& q, std::vector<__half>& k, std::vector<__half>& v, const std::string& key,
                       bool verbose) {
  const int d = kern.d;
  const Strides qs{(int64_t)sh.nq * sh.hq * d, (int64_t)sh.hq * d, d};
  const Strides kvs = sh.kv_bhsd ? Strides{(int64_t)sh.hkv * sh.nk * d, d, (int64_t)sh.nk * d}
                                 : Strides{(int64_t)sh.nk * sh.hkv * d, (int64_t)sh.hkv * d, d};
  auto it = cache.find(key);
  if (it == cache.end()) {
    Ref r;
    cpu_attention(sh, d, kern.causal, q, qs, k, v, kvs, r);
    it = cache.emplace(key, std::move(r)).first;
  }
  const Ref& r = it->second;
  const size_t no = (size_t)sh.b * sh.nq * sh.hq * d, nl = (size_t)sh.b * sh.hq * sh.nq;
  __half *dq, *dk, *dv, *dout;
  float* dl;
  CK(cudaMalloc(&dq, q.size() * 2));
  CK(cudaMalloc(&dk, k.size() * 2));
  CK(cudaMalloc(&dv, v.size() * 2));
  CK(cudaMalloc(&dout, (no + kGuard) * 2));
  CK(cudaMalloc(&dl, (nl + kGuard) * 4));
  CK(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, (no + kGuard) * 2));  // fp16 NaN
  CK(cudaMemset(dl, 0xff, (nl + kGuard) * 4));    // fp32 NaN
  FwdParams p{};
  p.q = dq; p.k = dk; p.v = dv; p.o = dout; p.lse = dl;
  p.q_batch_stride = qs.b; p.q_row_stride = qs.s; p.q_head_stride = qs.h;
  p.k_batch_stride = kvs.b; p.k_row_stride = kvs.s; p.k_head_stride = kvs.h;
  p.v_batch_stride = kvs.b; p.v_row_stride = kvs.s; p.v_head_stride = kvs.h;
  p.o_batch_stride = (int64_t)sh.nq * sh.hq * d; p.o_row_stride = (int64_t)sh.hq * d; p.o_head_stride = d;
  p.b = sh.b; p.nq = sh.nq; p.nk = sh.nk; p.hq = sh.hq; p.hkv = sh.hkv; p.d = d;
  p.scale = 1.f / std::sqrt((float)d);
  p.scale_log2 = p.scale * 1.4426950408889634f;
  kern.launch(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<__half> o(no + kGuard);
  std::vector<float> l(nl + kGuard);
  CK(cudaMemcpy(o.data(), dout, o.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(l.data(), dl, l.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(dq)); CK(cudaFree(dk)); CK(cudaFree(dv)); CK(cudaFree(dout)); CK(cudaFree(dl));

  double eo = 0, eob = 0, el = 0, elb = 0;
  long bad = 0, guard = 0;
  for (size_t row = 0; row < nl; ++row) {  // row = (b*hq + h)*nq + i
    const int i = row % sh.nq, h = (row / sh.nq) % sh.hq, b = row / ((size_t)sh.nq * sh.hq);
    const size_t ob = (((size_t)b * sh.nq + i) * sh.hq + h) * d;
    if (!r.seen[row]) {
      if (!(std::isinf(l[row]) && l[row] < 0)) ++bad;
      for (int e = 0; e < d; ++e)
        if (h2f(o[ob + e]) != 0.f) ++bad;
      continue;
    }
    if (!std::isfinite(l[row])) ++bad;
    el = std::max(el, std::fabs(l[row] - r.lse[row]));
    elb = std::max(elb, std::fabs(r.lse_base[row] - r.lse[row]));
    for (int e = 0; e < d; ++e) {
      const float g = h2f(o[ob + e]);
      if (!std::isfinite(g)) ++bad;
      eo = std::max(eo, std::fabs(g - r.o[ob + e]));
      eob = std::max(eob, std::fabs(r.o_base[ob + e] - r.o[ob + e]));
    }
  }
  for (int gI = 0; gI < kGuard; ++gI) {
    uint16_t bits;
    std::memcpy(&bits, &o[no + gI], 2);
    uint32_t lb;
    std::memcpy(&lb, &l[nl + gI], 4);
    if (bits != 0xffff || lb != 0xffffffffu) ++guard;
  }
  // eob can be 0 when every row is exact (Nk = 1): then the GPU must be exact too.
  const bool ok = bad == 0 && guard == 0 && eo <= 2 * eob && el <= 2 * elb;
  if (verbose || !ok)
    std::printf("%s %-6s %-26s B%d Hq%d Hkv%d Nq%-5d Nk%-5d %s  O err %.3g (base %.3g)  LSE err %.3g (base %.3g)%s%s\n",
                ok ? "ok  " : "FAIL", kern.src.c_str(), kern.name.c_str(), sh.b, sh.hq, sh.hkv, sh.nq, sh.nk,
                sh.kv_bhsd ? "kvBHSD" : "BSHD  ", eo, eob, el, elb, bad ? " NONFINITE/UNWRITTEN" : "",
                guard ? " GUARD-OVERWRITTEN" : "");
  return ok;
}

static const std::vector<Shape> kShapes = {
    {1, 1, 1, 1, 1, false},       {2, 3, 3, 17, 17, false},    {1, 4, 2, 97, 97, false},
    {1, 2, 1, 1025, 1025, false}, {2, 2, 2, 64, 200, true},    {1, 2, 2, 200, 77, false},
    {1, 6, 2, 1, 513, true},      {1, 1, 1, 300, 1, false},    {1, 8, 1, 129, 255, false},
    {1, 4, 1, 700, 1100, false},
};

static CheckStats run_checks(const std::vector<Kernel>& ks, bool verbose) {
  CheckStats st;
  std::map<std::string, Ref> cache;
  std::map<std::string, std::vector<__half>> inputs;
  for (const Kernel& kern : ks) {
    for (size_t si = 0; si < kShapes.size(); ++si) {
      const Shape& sh = kShapes[si];
      const std::string ikey = std::to_string(si) + "/" + std::to_string(kern.d);
      if (!inputs.count(ikey + "q")) {  // fresh random inputs per shape and head dim
        std::mt19937_64 rng(1000 + si * 7 + kern.d);
        auto& q = inputs[ikey + "q"];
        auto& k = inputs[ikey + "k"];
        auto& v = inputs[ikey + "v"];
        q.resize((size_t)sh.b * sh.nq * sh.hq * kern.d);
        k.resize((size_t)sh.b * sh.nk * sh.hkv * kern.d);
        v.resize(k.size());
        fill_normal(q, rng);
        fill_normal(k, rng);
        fill_normal(v, rng);
      }
      const std::string rkey = ikey + (kern.causal ? "c" : "n");
      ++st.cases;
      if (!check_case(kern, sh, cache, inputs[ikey + "q"], inputs[ikey + "k"], inputs[ikey + "v"], rkey, verbose))
        ++st.failed;
    }
  }
  return st;
}

// ---- benchmark ----
__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

struct Bench {
  __half *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* l = nullptr;
  static constexpr size_t kTokens = 16384, kHidden = 2048;
  void init() {
    const size_t n = kTokens * kHidden;
    CK(cudaMalloc(&q, n * 2)); CK(cudaMalloc(&k, n * 2)); CK(cudaMalloc(&v, n * 2)); CK(cudaMalloc(&o, n * 2));
    CK(cudaMalloc(&l, kTokens * (kHidden / 32) * 4));
    fill_random<<<1024, 256>>>(q, n, 1); fill_random<<<1024, 256>>>(k, n, 2); fill_random<<<1024, 256>>>(v, n, 3);
    CK(cudaDeviceSynchronize());
  }
  // Median time (ms) of `reps` launches at the paper shape (B = 16k/N, H = 2048/D).
  double time(const Kernel& kern, int n, int reps = 20) {
    const int d = kern.d, b = kTokens / n, h = kHidden / d;
    FwdParams p{};
    p.q = q; p.k = k; p.v = v; p.o = o; p.lse = l;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = (int64_t)n * h * d;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = (int64_t)h * d;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = d;
    p.b = b; p.nq = p.nk = n; p.hq = p.hkv = h; p.d = d;
    p.scale = 1.f / std::sqrt((float)d);
    p.scale_log2 = p.scale * 1.4426950408889634f;
    for (int i = 0; i < 3; ++i) kern.launch(p);
    CK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
      spin<<<1, 1>>>(100000);  // GPU busy while the host enqueues: launch overhead stays out of the time
      CK(cudaEventRecord(e0));
      kern.launch(p);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[reps / 2];
  }
  static double tflops(int d, int n, bool causal, double ms) {
    const double b = kTokens / n, h = kHidden / d;
    return 4.0 * b * h * n * (double)n * d / (causal ? 2 : 1) / (ms * 1e-3) / 1e12;
  }
};

static const int kBenchN[] = {512, 1024, 2048, 4096, 8192, 16384};

// bench_set shape-major: per (D, causal, N) every kernel of that head dim and
// mask in turn, `rounds` times, reporting each one's best median: a GPU's
// clocks drift over a long run, and kernel-major order would hand the drift
// to whichever candidate runs last.
static void bench_interleaved(Bench& bn, const std::vector<Kernel>& ks, const std::vector<int>& ns, int rounds = 2,
                              int reps = 20) {
  std::vector<std::vector<double>> best(ks.size(), std::vector<double>(ns.size(), 1e30));
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < ns.size(); ++j)
      for (size_t i = 0; i < ks.size(); ++i) best[i][j] = std::min(best[i][j], bn.time(ks[i], ns[j], reps));
  for (size_t i = 0; i < ks.size(); ++i)
    for (size_t j = 0; j < ns.size(); ++j) {
      const Kernel& kern = ks[i];
      std::printf("bench %-6s %-40s %-20s D%-3d causal=%d N=%-5d %8.3f ms %7.1f TFLOP/s\n", kern.src.c_str(),
                  kern.name.c_str(), kern.tile().c_str(), kern.d, kern.causal, ns[j], best[i][j],
                  Bench::tflops(kern.d, ns[j], kern.causal, best[i][j]));
    }
}

static void bench_set(Bench& bn, const std::vector<Kernel>& ks, const std::vector<int>& ns, FILE* csv, int reps = 20) {
  for (const Kernel& kern : ks) {
    for (int n : ns) {
      const double ms = bn.time(kern, n, reps);
      const double tf = Bench::tflops(kern.d, n, kern.causal, ms);
      std::printf("bench %-6s %-40s %-20s D%-3d causal=%d N=%-5d %8.3f ms %7.1f TFLOP/s\n", kern.src.c_str(),
                  kern.name.c_str(), kern.tile().c_str(), kern.d, kern.causal, n, ms, tf);
      if (csv)
        std::fprintf(csv, "%s,%s,%s,%d,%d,%d,%.4f,%.2f\n", kern.src.c_str(), kern.name.c_str(), kern.tile().c_str(),
                     kern.d, kern.causal, n, ms, tf);
      std::fflush(stdout);
    }
  }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  const std::string dir = argc > 2 ? argv[2] : "internal/kernels";
  const char* outdir = std::getenv("OUT");
  CK(cudaFree(0));  // create the primary context the driver-API modules load into
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s sm_%d%d, %d SMs, CUDA runtime %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, CUDART_VERSION);
  const bool have_drv = drv.load();
  g_sms = prop.multiProcessorCount;

  std::vector<Kernel> tpl = shipped_tpl(), fat, ptx;
  if (have_drv && mode != "ladder-check") {  // ladder-check: the rungs alone (compute-sanitizer runs)
    fat = shipped_module(dir + "/fa2_fwd.fatbin", "fatbin", 0);
    ptx = shipped_module(dir + "/fa2_fwd_ptx75.fatbin", "ptx75", 75);
  }
  for (auto* set : {&tpl, &fat, &ptx})
    for (Kernel& k : *set) k.prepare();
#ifdef FA2_TUNE
  std::vector<Kernel> cand = candidates();
  for (Kernel& k : cand) k.prepare();
#endif

  int failed = 0;
#ifdef FA2_SM90A
  if (mode == "sm90a" || mode == "sm90a-check") {  // sm90a-check: no timing (compute-sanitizer runs)
    // Checked (and under compute-sanitizer): the Hopper kernels as compiled
    // here and from the committed cubin; timed: those and the fatbin's sm_80
    // kernels of the same head dims (what ForcePath(80) runs).
    std::vector<Kernel> h = sm90a_tpl(), hc = sm90a_cubin(dir + "/fa2_sm90a.cubin");
    h.insert(h.end(), hc.begin(), hc.end());
    for (int i = 3; i < argc; ++i) {  // candidates: NAME=PATH,D:Br:Bc:stages,...
      std::vector<Kernel> c = sm90a_candidate(argv[i]);
      h.insert(h.end(), c.begin(), c.end());
    }
    for (Kernel& k : h) k.prepare();
    const unsigned sms = g_sms;
    g_sms = std::getenv("CHECK_SMS") ? std::atoi(std::getenv("CHECK_SMS")) : 5;  // CTAs of a persistent kernel when checked
    const CheckStats st = run_checks(h, true);
    g_sms = sms;
    std::printf("check sm90a : %d/%d cases pass\n", st.cases - st.failed, st.cases);
    std::fflush(stdout);
    if (mode == "sm90a" && st.failed == 0) {
      std::vector<Kernel> ref;
      for (const Kernel& k : fat)
        if (k.arch == 80 && (k.d == 64 || k.d == 128)) ref.push_back(k);
      Bench bn;
      bn.init();
      std::vector<Kernel> all = h;
      all.insert(all.end(), ref.begin(), ref.end());
      // ROUNDS (default 2) and NS (sequence lengths, comma-separated) override the sweep.
      std::vector<int> ns = {2048, 4096, 8192, 16384};
      if (const char* e = std::getenv("NS")) {
        ns.clear();
        std::stringstream ss(e);
        for (std::string x; std::getline(ss, x, ',');) ns.push_back(std::atoi(x.c_str()));
      }
      const char* rounds = std::getenv("ROUNDS");
      bench_interleaved(bn, all, ns, rounds ? std::max(1, std::atoi(rounds)) : 2);
    }
    std::printf("%s\n", st.failed ? "CHECK FAILED" : "all checks passed");
    return st.failed ? 1 : 0;
  }
#endif
  if (mode == "ladder" || mode == "ladder-check") {
    // The kernel ladder (tutorial chapter 6): rungs 1-4 as compiled here, from the
    // fatbin (what Go runs) and from the sm_75 PTX (the forced Turing path), each
    // checked on every shape; then timed with rung 5, the shipped kernel of each path.
    std::vector<Kernel> ltpl = ladder_tpl(), lfat, lptx;
    if (have_drv && mode == "ladder") {
      lfat = shipped_module(dir + "/fa2_ladder.fatbin", "fatbin", 0, true);
      lptx = shipped_module(dir + "/fa2_ladder_ptx75.fatbin", "ptx75", 75, true);
    }
    for (auto* set : {&ltpl, &lfat, &lptx}) {
      if (set->empty()) continue;
      for (Kernel& k : *set) k.prepare();
      const CheckStats st = run_checks(*set, false);
      std::printf("check ladder %-6s: %d/%d cases pass\n", (*set)[0].src.c_str(), st.cases - st.failed, st.cases);
      failed += st.failed;
    }
    std::fflush(stdout);
    if (mode == "ladder") {
      FILE* csv = outdir ? std::fopen((std::string(outdir) + "/ladder_bench.csv").c_str(), "w") : nullptr;
      if (csv) std::fprintf(csv, "src,kernel,tile,d,causal,n,ms,tflops\n");
      Bench bn;
      bn.init();
      auto d64 = [](const std::vector<Kernel>& ks, int arch) {
        std::vector<Kernel> v;
        for (const Kernel& k : ks)
          if (k.d == 64 && k.arch == arch) v.push_back(k);
        return v;
      };
      for (int n : {1024, 4096}) {
        bench_set(bn, lfat, {n}, csv, 5);
        bench_set(bn, d64(fat, 80), {n}, csv, 5);
        bench_set(bn, lptx, {n}, csv, 5);
        bench_set(bn, d64(ptx, 75), {n}, csv, 5);
      }
      if (csv) std::fclose(csv);
    }
    std::printf("%s\n", failed ? "CHECK FAILED" : "all checks passed");
    return failed ? 1 : 0;
  }
  if (mode == "check" || mode == "all") {
    for (auto* set : {&tpl, &fat, &ptx}) {
      if (set->empty()) continue;
      const CheckStats st = run_checks(*set, false);
      std::printf("check %-6s: %d/%d cases pass\n", (*set)[0].src.c_str(), st.cases - st.failed, st.cases);
      failed += st.failed;
    }
#ifdef FA2_TUNE
    const CheckStats st = run_checks(cand, false);
    std::printf("check cand  : %d/%d cases pass\n", st.cases - st.failed, st.cases);
    failed += st.failed;
#endif
    std::fflush(stdout);
  }
  FILE* csv = nullptr;
  if (outdir && (mode == "bench" || mode == "tune" || mode == "all")) {
    csv = std::fopen((std::string(outdir) + "/fwd_bench.csv").c_str(), "w");
    if (csv) std::fprintf(csv, "src,kernel,tile,d,causal,n,ms,tflops\n");
  }
  Bench bn;
  if (mode != "check") bn.init();
#ifdef FA2_TUNE
  if (mode == "tune" || mode == "all")
    for (int round = 0; round < 2; ++round) bench_set(bn, cand, {2048, 8192}, csv);  // twice: the spread is the noise
#endif
  if (mode == "quick") {  // compiler comparison: shipped sm_80 D64/D128 at two lengths
    std::vector<Kernel> v;
    for (const Kernel& k : tpl)
      if (k.arch == 80 && (k.d == 64 || k.d == 128)) v.push_back(k);
    bench_set(bn, v, {2048, 8192}, csv);
  }
  if (mode == "bench" || mode == "all") {
    auto pick = [](const std::vector<Kernel>& ks, int arch, std::vector<int> ds) {
      std::vector<Kernel> v;
      for (const Kernel& k : ks)
        if (k.arch == arch && std::find(ds.begin(), ds.end(), k.d) != ds.end()) v.push_back(k);
      return v;
    };
    const std::vector<int> ns(std::begin(kBenchN), std::end(kBenchN));
    bench_set(bn, pick(tpl, 80, {64, 128}), ns, csv);
    bench_set(bn, pick(fat, 80, {64, 128}), ns, csv);
    bench_set(bn, pick(ptx, 75, {64, 128}), {2048, 8192}, csv);
    bench_set(bn, pick(tpl, 80, {32, 96, 256}), {2048}, csv);
  }
  if (csv) std::fclose(csv);
  std::printf("%s\n", failed ? "CHECK FAILED" : "all checks passed");
  return failed ? 1 : 0;
}
