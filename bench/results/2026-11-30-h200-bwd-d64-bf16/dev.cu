// bwd3 dev tiles for D64 (not committed; copied into bench/results)
#define BWD_DEV_TILES(X) \
  X(nr64, 80, 64, 128, 64, 8, 4, 4, 2, false, 1) \
  X(s81, 80, 64, 128, 64, 8, 8, 4, 2, true, 1) \
  X(s81v8, 80, 64, 128, 64, 8, 8, 8, 2, true, 1) \
  X(s81n, 80, 64, 128, 64, 8, 8, 4, 2, false, 1)
#include "kernels/dev/bwd_check.cu"
