// dev.h: what the dev harnesses (fwd_check.cu, bwd_check.cu, bwd_sm90_check.cu)
// share: a CUDA runtime error check, the driver API reached through dlopen (no
// -lcuda at link time) to load the committed fatbin or PTX as Go does
// (cuModuleLoadData), the benchmark inputs, and (CUDA 12) the sm_90a kernels'
// TMA tensor maps.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// Benchmark inputs, as the product bench's N(0, 1): a sum of 4 uniforms
// from a hash of the index (mean 0, variance 1), rounded to E.
template <class E>
__global__ void fill_random(E* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float s = 0;
    for (int k = 0; k < 4; ++k) s += ((z >> (16 * k)) & 0xffff) / 65536.f - 0.5f;
    if constexpr (std::is_same<E, __nv_bfloat16>::value) x[i] = __float2bfloat16_rn(s * 1.7320508f);
    else x[i] = __float2half_rn(s * 1.7320508f);
  }
}

struct Driver {
  CUresult (*ModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void**, void**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  bool load() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return false;
    ModuleLoadData = (decltype(ModuleLoadData))dlsym(h, "cuModuleLoadData");
    ModuleGetFunction = (decltype(ModuleGetFunction))dlsym(h, "cuModuleGetFunction");
    FuncSetAttribute = (decltype(FuncSetAttribute))dlsym(h, "cuFuncSetAttribute");
    LaunchKernel = (decltype(LaunchKernel))dlsym(h, "cuLaunchKernel");
    GetErrorString = (decltype(GetErrorString))dlsym(h, "cuGetErrorString");
    return ModuleLoadData && ModuleGetFunction && FuncSetAttribute && LaunchKernel && GetErrorString;
  }
  void check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* s = "?";
    GetErrorString(r, &s);
    std::fprintf(stderr, "driver: %s: %s\n", what, s);
    std::exit(1);
  }
};
static Driver drv;

// A module image (fatbin, or PTX: NUL-terminated here) read whole; "" if unreadable.
static std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

#if CUDA_VERSION >= 12000
// A TMA tensor map of 16-bit elements (fp16, or bf16) at base: 4-d (d,
// row, head, batch) with element strides rs, hs, bs, boxes of 64 columns x
// box_rows rows, 128-byte swizzle, rows out of bounds read as zero (what
// flashattn's encodeSM90A makes in Go). cuTensorMapEncodeTiled is taken from
// libcuda by dlsym, as the rest of the driver API above.
static CUresult tensor_map16(unsigned char* out, bool bf16, const void* base, int d, int rows, int heads, int batch, int64_t rs,
                             int64_t hs, int64_t bs, int box_rows) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    return lib ? reinterpret_cast<Encode>(dlsym(lib, "cuTensorMapEncodeTiled")) : nullptr;
  }();
  if (!encode) return CUDA_ERROR_NOT_FOUND;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(rs * 2), static_cast<cuuint64_t>(hs * 2), static_cast<cuuint64_t>(bs * 2)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1}, unit[4] = {1, 1, 1, 1};
  CUtensorMap tm;
  const CUresult r = encode(&tm, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(base), dims,
                            strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::memcpy(out, &tm, sizeof tm);
  return r;
}
#endif
