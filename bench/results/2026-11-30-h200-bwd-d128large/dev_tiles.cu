// dev candidates beside the shipped large D128 single-pass tile (issue 15, bwd4):
// FA2's own warp grids (S^T 4x2, dK/dV 4x2) and S^T 4x2 with dK/dV 2x4.
#define BWD_DEV_TILES(X) \
  X(L442, 80, 128, 128, 64, 8, 4, 4, 2, false, 1) \
  X(L422, 80, 128, 128, 64, 8, 4, 2, 2, false, 1)
#include "/work/wt-bwd4/kernels/dev/bwd_check.cu"
