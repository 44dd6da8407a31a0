// Session 32 dev: D64 decode tiles under the shipped symbol names, so decode_sidebyside.py's A/B can
// time them against the fatbin (sm_90 SASS; nvcc 11.8 -O3 -std=c++17 -arch=sm_90 -cubin -I kernels
// -DBC=.. -DWARPS=.. -DSTAGES=..). The shipped D64 row is X(80, 64, 128, 4, 3, 16); the D128 row is
// built as shipped, as the control.
#include "decode.cuh"
using namespace fa2;
extern "C" __global__ void __launch_bounds__(128, 2) fa2_decode_sm80_d64(const DecodeParams p) {
  fa2::arch_entry<80, DecodeParams, fa2::decode_kernel<DecodeTile<80, 64, BC, WARPS, STAGES, 16>, __half>>(p);
}
extern "C" __global__ void __launch_bounds__(128, 2) fa2_decode_sm80_d128(const DecodeParams p) {
  fa2::arch_entry<80, DecodeParams, fa2::decode_kernel<DecodeTraits<80, 128>::type, __half>>(p);
}
