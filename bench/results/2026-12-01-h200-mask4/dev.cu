#include "fwd.cuh"
#define K(NAME, E, BITS) extern "C" __global__ void __launch_bounds__(FwdTraits<80, 64>::type::kThreads, FwdTraits<80, 64>::type::kMinBlocks) \
  NAME(const FwdParams p) { fa2::arch_entry<80, FwdParams, fa2::fwd_kernel<FwdTraits<80, 64>::type, false, E, BITS>>(p); }
K(plain, __half, 0)
K(cap, __half, fa2::kModOn | fa2::kModCap)
extern "C" __global__ void __launch_bounds__(FwdTraits<80, 64>::type::kThreads, FwdTraits<80, 64>::type::kMinBlocks)
  plainc(const FwdParams p) { fa2::arch_entry<80, FwdParams, fa2::fwd_kernel<FwdTraits<80, 64>::type, true>>(p); }
K(alibi, __half, fa2::kModOn | fa2::kModALiBi)
K(modonly, __half, fa2::kModOn)
K(capb, __nv_bfloat16, fa2::kModOn | fa2::kModCap)
