// dev candidate beside the shipped D64 large tile (192 x 64, S^T 2x4): S^T 4x2
// (48 keys x 32 queries per warp: fewer ldmatrix per mma for S^T and dP^T).
#define BWD_DEV_TILES(X) \
  X(S42, 80, 64, 192, 64, 8, 4, 4, 2, false, 1)
#include "/work/main/kernels/dev/bwd_check.cu"
