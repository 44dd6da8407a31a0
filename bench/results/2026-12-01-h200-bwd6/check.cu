// bwd6 dev tiles for D64 (name, arch, d, Bc, Br, warps, SK, VK, QM, kvregs, minblocks)
#include "trim.h"
#define BWD_DEV_TILES(X) \
  X(l192, 80, 64, 192, 64, 8, 4, 4, 2, false, 1) \
  X(l192s2, 80, 64, 192, 64, 8, 2, 4, 2, false, 1)
#include "dev/bwd_check.cu"
