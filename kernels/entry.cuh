// entry.cuh: the one arch-path guard of every kernel entry. The sm_80 path uses
// m16n8k16 and cp.async, which an sm_75 build cannot emit: there its kernels
// trap (the Go table never picks them below sm_80).
#pragma once

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
