// fwd_sm90_cand.cu: candidate Hopper forward tiles under the shipped kernel names,
// for fwd_check.cu's `NAME=PATH,D:Br:Bc:stages[:n|:o|:2]` arguments (one cubin each):
//   $(kernels/cuda12.sh) -O3 -std=c++17 -Xptxas -v -cubin -gencode arch=compute_90a,code=sm_90a \
//     -DBR=256 -DBC=64 -DST=2 kernels/dev/fwd_sm90_cand.cu -o br256_64.cubin   # 64:256:64:2
// Head dim HD (default 64) on Br BR (BR/64 consumers; Tile90 splits the registers), Bc BC,
// ST stages; -DSO=1 stages O through shared memory (the tile argument's ":o");
// -DPER_SM=2 two CTAs per SM (":2").
#include "../fwd_sm90.cuh"
#if !defined(BR) || !defined(BC) || !defined(ST)
#error "define BR, BC and ST"
#endif
#ifndef HD
#define HD 64
#endif
#ifndef SO
#define SO 0
#endif
#ifndef PER_SM
#define PER_SM 1
#endif
// PER_SM CTAs resident per SM (the tile argument's ":2"): the registers split from
// what each gets at launch.
using TB = Tile90<HD, BR, BC, ST, 0, true, SO != 0>;
struct TC : TB {
  static constexpr int kLaunchRegs = sm90_launch_regs(TB::kThreads * PER_SM);
  static constexpr int kConsumerRegs = ((TB::kConsumers + 1) * kLaunchRegs - TB::kProducerRegs) / TB::kConsumers / 8 * 8;
  static_assert(kConsumerRegs >= TB::kD / 2 + TB::kBc / 2 + TB::kBc / 4 + 24, "O, S and P must fit");
  static_assert(PER_SM * (TB::kSmemBytes + 1024) <= 228 * 1024, "shared memory for PER_SM CTAs");
};
#define K(NAME, T, C)                                                                                     \
  extern "C" __global__ void __launch_bounds__(T::kThreads, PER_SM) NAME(const __grid_constant__ Sm90FwdArgs a) { \
    sm90::fwd_kernel<T, C, 0, __half>(a);                                                                  \
  }
#define KNAME2(d, sfx) fa2_fwd_sm90a_d##d##sfx
#define KNAME(d, sfx) KNAME2(d, sfx)
K(KNAME(HD, ), TC, false)
K(KNAME(HD, _causal), TC, true)
