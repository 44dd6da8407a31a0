// fa2_sm90a.cu: the Hopper forward kernels, fa2_fwd_sm90a_d{D}[_causal], for
// exactly the rows of traits.cuh's FA2_SM90A_TILES. Built by build.sh with the
// private nvcc 12.4 (kernels/cuda12.sh) as SASS for sm_90a only, into
// fa2_sm90a.cubin, a module of its own beside fa2.fatbin (which nvcc 11.8 builds
// and whose sm_90 image the forced sm_80 path keeps running on an H100/H200).
// The argument is an Sm90FwdArgs (params.cuh): the tensor maps of q, k, v, then
// FwdParams. Launch: grid (ceil(Nq/Br), B*Hq), T::kThreads threads,
// T::kSmemBytes of dynamic shared memory.
#include "fwd_sm90.cuh"

#define FA2_SM90A_FWD(D, ...)                                                                                   \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D(const __grid_constant__ Sm90FwdArgs a) {                                              \
    sm90::fwd_kernel<Sm90Traits<D>::type, false>(a);                                                           \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D##_causal(const __grid_constant__ Sm90FwdArgs a) {                                     \
    sm90::fwd_kernel<Sm90Traits<D>::type, true>(a);                                                            \
  }
FA2_SM90A_TILES(FA2_SM90A_FWD)
