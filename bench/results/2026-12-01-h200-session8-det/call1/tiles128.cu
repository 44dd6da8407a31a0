// dev candidates beside the shipped D64 large tile (192 x 64): 128 keys x 64
// queries, no padding at N = 2048, 4096 (192 pads those by 3%).
#define BWD_DEV_TILES(X) \
  X(L128a, 80, 64, 128, 64, 8, 2, 4, 2, false, 1) \
  X(L128b, 80, 64, 128, 64, 8, 4, 4, 2, false, 1)
#include "/work/main/kernels/dev/bwd_check.cu"
