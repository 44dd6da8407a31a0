// entry.cuh: the arch-path guards of every kernel entry. The sm_80 path uses
// m16n8k16 and cp.async, which an sm_75 build cannot emit: there its kernels
// trap (the Go table never picks them below sm_80).
#pragma once

// Each family's Turing PTX image (fa2_<family>_ptx75.fatbin, built with
// FA2_SM75_ONLY) holds the Turing kernels alone: FA2_IF_<arch> drops the
// others. Turing has no bf16 mma, so FA2_BF16_<arch> drops the sm_75 bf16 rows.
#define FA2_IF_75(...) __VA_ARGS__
#ifdef FA2_SM75_ONLY
#define FA2_IF_80(...)
#else
#define FA2_IF_80(...) __VA_ARGS__
#endif
#define FA2_BF16_75(...)
#define FA2_BF16_80(...) FA2_IF_80(__VA_ARGS__)

namespace fa2 {

template <int Arch, class P, void (*Kernel)(const P&)>
__device__ __forceinline__ void arch_entry(const P& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  if constexpr (Arch >= 80) {
    __trap();
  } else
#endif
  {
    Kernel(p);
  }
}

}  // namespace fa2
