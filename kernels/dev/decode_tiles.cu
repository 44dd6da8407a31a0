// decode_tiles.cu: candidate decode tiles for head dim 128 on the sm_80 path,
// beside the shipped one (traits.cuh's FA2_DECODE_TILES row), for
// decode_sidebyside.py --tiles: with B*Hkv = 8 kv heads a B = 1 decode is
// split over the cache, and what limits the bandwidth is bytes in flight per
// SM (stages - 1 blocks per CTA, times the CTAs that fit) and the fixed cost
// per CTA. The symbols name their tile: dev_decode_bc{Bc}_w{warps}_s{stages}.
//
// Build here with nvcc 11.8, as the fatbin (the H200 runs the sm_90 SASS):
//   nvcc -O3 -std=c++17 -cubin -arch=sm_90 -Xptxas -v kernels/dev/decode_tiles.cu -o .build/decode_tiles.cubin
#include "../decode.cuh"

#define FA2_DEV_DECODE(BC, W, S)                                                                     \
  extern "C" __global__ void __launch_bounds__(W * 32) dev_decode_bc##BC##_w##W##_s##S(const DecodeParams p) { \
    fa2::arch_entry<80, DecodeParams, fa2::decode_kernel<DecodeTile<80, 128, BC, W, S>, __half>>(p);   \
  }
FA2_DEV_DECODE(64, 4, 3)  // the shipped row: 96 KiB, two CTAs per H200 SM, 2 x 32 KiB in flight each
FA2_DEV_DECODE(64, 4, 2)  // 64 KiB: three CTAs per SM, 1 x 32 KiB in flight each
FA2_DEV_DECODE(64, 2, 3)  // 96 KiB, two warps: half the threads issue the same bytes
FA2_DEV_DECODE(32, 2, 3)  // 48 KiB: four CTAs per SM, 2 x 16 KiB in flight each
FA2_DEV_DECODE(32, 2, 4)  // 64 KiB: three CTAs per SM, 3 x 16 KiB in flight each
FA2_DEV_DECODE(32, 2, 6)  // 96 KiB: two CTAs per SM, 5 x 16 KiB in flight each
FA2_DEV_DECODE(16, 1, 4)  // 32 KiB: six one-warp CTAs per SM, 3 x 8 KiB in flight each

extern "C" __global__ void __launch_bounds__(fa2::kCombineThreads) dev_decode_combine_d128(const DecodeParams p) {
  fa2::decode_combine_kernel<128, __half>(p);
}
