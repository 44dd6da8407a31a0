// fwd_sm90_cand.cu: candidate Hopper forward tiles under the shipped kernel names,
// for fwd_check.cu's `NAME=PATH,D:Br:Bc:stages[:n]` arguments (one cubin each):
//   $(kernels/cuda12.sh) -O3 -std=c++17 -Xptxas -v -cubin -gencode arch=compute_90a,code=sm_90a \
//     -DBR=256 -DBC=64 -DST=2 kernels/dev/fwd_sm90_cand.cu -o br256_64.cubin   # 64:256:64:2
// D64 on Br BR (BR/64 consumers; Tile90 splits the registers), Bc BC, ST stages.
#include "../fwd_sm90.cuh"
#if !defined(BR) || !defined(BC) || !defined(ST)
#error "define BR, BC and ST"
#endif
using T64 = Tile90<64, BR, BC, ST, 0, true, false>;
#define K(NAME, T, C)                                                                                     \
  extern "C" __global__ void __launch_bounds__(T::kThreads, 1) NAME(const __grid_constant__ Sm90FwdArgs a) { \
    sm90::fwd_kernel<T, C, 0, __half>(a);                                                                  \
  }
K(fa2_fwd_sm90a_d64, T64, false)
K(fa2_fwd_sm90a_d64_causal, T64, true)
