// dev.h: what the dev harnesses (fwd_check.cu, bwd_check.cu) share: a CUDA
// runtime error check, and the driver API reached through dlopen (no -lcuda at
// link time) to load the committed fatbin or PTX as Go does (cuModuleLoadData).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

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
