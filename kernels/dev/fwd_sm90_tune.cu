// fwd_sm90_tune.cu: candidate tiles of the Hopper forward (fwd_sm90.cuh) for
// short sequences, checked against a float64 CPU forward and timed on the FA2
// paper shapes (16k tokens per batch, hidden 2048) in one process, so that one
// GPU run picks a traits.cuh row. Each candidate also runs with one CTA per
// tile instead of the persistent grid of one per SM ("tiles" beside "sms").
//
// Build on the GPU machine (nvcc 12.3+), from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v kernels/dev/fwd_sm90_tune.cu -o .build/fwd_sm90_tune -lcuda
//   .build/fwd_sm90_tune            # check every candidate, then time them at N 512-8192
// Here (no GPU): $(kernels/cuda12.sh) -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -c kernels/dev/fwd_sm90_tune.cu
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../fwd_sm90.cuh"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// FWD90_CANDIDATES(X): X(name, D, Br, Bc, stages); the first of a head dim is
// the shipped row (traits.cuh's FA2_SM90A_TILES). Bc is a wgmma N the
// wrappers have (64 or 128); Tile90 checks that O, S and P fit the
// consumers' registers.
#define FWD90_CANDIDATES(X)          \
  X(d64_shipped, 64, 192, 128, 2)    \
  X(d64_br128, 64, 128, 128, 2)      \
  X(d64_bc64, 64, 192, 64, 2)        \
  X(d64_bc64_s4, 64, 192, 64, 4)     \
  X(d64_br128_bc64, 64, 128, 64, 4)  \
  X(d128_shipped, 128, 128, 128, 2)  \
  X(d128_bc64, 128, 128, 64, 2)      \
  X(d128_bc64_s4, 128, 128, 64, 4)   \
  X(d128_br192_bc64, 128, 192, 64, 2)

#define FWD90_KERNELS(NAME, D, BR, BC, S)                                                                      \
  using NAME##_t = Tile90<D, BR, BC, S, 0>;                                                                    \
  __global__ void __launch_bounds__(NAME##_t::kThreads, 1) NAME##_plain(const __grid_constant__ Sm90FwdArgs a) { \
    sm90::fwd_kernel<NAME##_t, false>(a);                                                                      \
  }                                                                                                            \
  __global__ void __launch_bounds__(NAME##_t::kThreads, 1) NAME##_causal(const __grid_constant__ Sm90FwdArgs a) { \
    sm90::fwd_kernel<NAME##_t, true>(a);                                                                       \
  }
FWD90_CANDIDATES(FWD90_KERNELS)

struct Candidate {
  const char* name;
  int d, br, bc, stages, threads, smem;
  void (*plain)(const Sm90FwdArgs), (*causal)(const Sm90FwdArgs);
};
#define FWD90_ROW(NAME, D, BR, BC, S) \
  {#NAME, D, BR, BC, S, NAME##_t::kThreads, NAME##_t::kSmemBytes, NAME##_plain, NAME##_causal},
static const Candidate kCandidates[] = {FWD90_CANDIDATES(FWD90_ROW)};

// The map of a BSHD fp16 tensor (B, N, H, D) in boxes of 64 columns x rows.
static void make_map(unsigned char* out, const void* base, int b, int n, int h, int d, int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(n), cuuint64_t(h), cuuint64_t(b)};
  const cuuint64_t strides[3] = {cuuint64_t(h) * d * 2, cuuint64_t(d) * 2, cuuint64_t(n) * h * d * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1}, elem[4] = {1, 1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(out), CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(base),
                                      dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::exit((std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r)), 1));
}

struct Buffers {
  __half *q, *k, *v, *o;
  float* lse;
  Sm90FwdArgs a;
};

// Device buffers and the kernel argument of a BSHD problem (Hkv = Hq) for tile c.
static Buffers alloc(const Candidate& c, int b, int n, int h, const std::vector<__half>* q, const std::vector<__half>* k,
                     const std::vector<__half>* v) {
  Buffers x{};
  const size_t e = size_t(b) * n * h * c.d;
  CK(cudaMalloc(&x.q, e * 2));
  CK(cudaMalloc(&x.k, e * 2));
  CK(cudaMalloc(&x.v, e * 2));
  CK(cudaMalloc(&x.o, e * 2));
  CK(cudaMalloc(&x.lse, size_t(b) * h * n * 4));
  if (q) {
    CK(cudaMemcpy(x.q, q->data(), e * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x.k, k->data(), e * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x.v, v->data(), e * 2, cudaMemcpyHostToDevice));
  } else {
    CK(cudaMemset(x.q, 0, e * 2));
    CK(cudaMemset(x.k, 0, e * 2));
    CK(cudaMemset(x.v, 0, e * 2));
  }
  make_map(x.a.q_map, x.q, b, n, h, c.d, 64);
  make_map(x.a.k_map, x.k, b, n, h, c.d, c.bc);
  make_map(x.a.v_map, x.v, b, n, h, c.d, c.bc);
  FwdParams& p = x.a.p;
  p = FwdParams{};
  p.q = x.q, p.k = x.k, p.v = x.v, p.o = x.o, p.lse = x.lse;
  const int64_t rs = int64_t(h) * c.d, hs = c.d, bs = int64_t(n) * h * c.d;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = bs;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = rs;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = hs;
  p.b = b, p.nq = p.nk = n, p.hq = p.hkv = h, p.d = c.d;
  p.scale = float(1.0 / std::sqrt(double(c.d)));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.window_left = p.window_right = -1;
  return x;
}

static void release(Buffers& x) {
  for (void* p : {(void*)x.q, (void*)x.k, (void*)x.v, (void*)x.o, (void*)x.lse}) CK(cudaFree(p));
}

static void launch(const Candidate& c, bool causal, const Buffers& x, int grid) {
  auto* fn = causal ? c.causal : c.plain;
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));
  fn<<<grid, c.threads, c.smem>>>(x.a);
  CK(cudaGetLastError());
}

static int tiles(const Candidate& c, int b, int n, int h) { return (n + c.br - 1) / c.br * b * h; }

// O against a float64 forward on fp16 inputs: max error within 2x that of a
// baseline that rounds P and O to fp16, plus 4 fp16 unit roundoffs of max |O|.
static bool check(const Candidate& c, bool causal, int sms) {
  const int b = 2, n = 333, h = 3, d = c.d;
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<__half> q(size_t(b) * n * h * d), k(q.size()), v(q.size()), o(q.size());
  for (auto* t : {&q, &k, &v})
    for (auto& e : *t) e = __float2half_rn(nd(gen));
  Buffers x = alloc(c, b, n, h, &q, &k, &v);
  launch(c, causal, x, std::min(tiles(c, b, n, h), sms));
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(o.data(), x.o, o.size() * 2, cudaMemcpyDeviceToHost));
  release(x);
  const double scale = 1.0 / std::sqrt(double(d));
  double eg = 0, eb = 0, omax = 0;
  std::vector<double> p(n);
  for (int bb = 0; bb < b; ++bb)
    for (int hh = 0; hh < h; ++hh)
      for (int i = 0; i < n; ++i) {
        auto at = [&](const std::vector<__half>& t, int r, int col) { return double(__half2float(t[((size_t(bb) * n + r) * h + hh) * d + col])); };
        const int last = causal ? i : n - 1;
        double mx = -INFINITY, l = 0;
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int col = 0; col < d; ++col) s += at(q, i, col) * at(k, j, col);
          mx = std::max(mx, p[j] = s * scale);
        }
        for (int j = 0; j <= last; ++j) l += (p[j] = std::exp(p[j] - mx));
        for (int col = 0; col < d; ++col) {
          double t = 0, bl = 0;
          for (int j = 0; j <= last; ++j) {
            t += p[j] * at(v, j, col);
            bl += double(__half2float(__float2half_rn(float(p[j])))) * at(v, j, col);
          }
          t /= l;
          bl = double(__half2float(__float2half_rn(float(bl / l))));
          const double g = __half2float(o[((size_t(bb) * n + i) * h + hh) * d + col]);
          eg = std::max(eg, std::isnan(g) ? INFINITY : std::fabs(g - t));
          eb = std::max(eb, std::fabs(bl - t));
          omax = std::max(omax, std::fabs(t));
        }
      }
  const bool ok = eg <= 2 * eb + 4.0 / 2048 * omax;
  std::printf("%s %-16s %s: max |err| %.2e, bound %.2e\n", ok ? "ok  " : "FAIL", c.name, causal ? "causal" : "plain ", eg,
              2 * eb + 4.0 / 2048 * omax);
  return ok;
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int fails = 0;
  for (const auto& c : kCandidates)
    for (bool causal : {false, true}) fails += !check(c, causal, sms);
  if (fails) {
    std::printf("CHECK FAILED (%d)\n", fails);
    return 1;
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::printf("candidate         mask    grid       N   ms      TFLOP/s\n");
  for (const auto& c : kCandidates)
    for (bool causal : {false, true})
      for (int n : {512, 1024, 2048, 8192}) {
        const int b = 16384 / n, h = 2048 / c.d;
        Buffers x = alloc(c, b, n, h, nullptr, nullptr, nullptr);
        for (int persistent = 1; persistent >= 0; --persistent) {
          const int grid = persistent ? std::min(tiles(c, b, n, h), sms) : tiles(c, b, n, h);
          std::vector<float> ms;
          for (int it = 0; it < 25; ++it) {
            CK(cudaEventRecord(e0));
            launch(c, causal, x, grid);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t;
            CK(cudaEventElapsedTime(&t, e0, e1));
            if (it >= 5) ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          const double med = ms[ms.size() / 2], flops = 4.0 * b * h * double(n) * n * c.d / (causal ? 2 : 1);
          std::printf("%-17s %-7s %-6s %6d %8.4f %7.1f\n", c.name, causal ? "causal" : "plain", persistent ? "sms" : "tiles", n, med,
                      flops / med / 1e9);
        }
        release(x);
      }
  return 0;
}
