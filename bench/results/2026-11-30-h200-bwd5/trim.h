// dev wrapper (not in the tree): the shipped sources with the kernel lists cut
// to the D128 sm_80 rows, so one sm_90 build takes minutes on the 2-core box.
#include "traits.cuh"
#include "ladder/ladder.cuh"
#undef FA2_FWD_TILES
#undef FA2_BWD_TILES
#undef FA2_BWD_KVQ_TILES
#undef FA2_BWD_PRE_ALONE
#undef FA2_DECODE_TILES
#undef FA2_LADDER
#define FA2_FWD_TILES(X) X(80, 64, 128, 128, 4, 2, 2, true, 1) X(80, 128, 128, 64, 4, 2, 2, false, 1)
#define FA2_BWD_TILES(X) X(80, 128, (128, 32, 8, 2, 32, false, 1), (128, 32, 4, 2, 16, false, 1))
#define FA2_BWD_KVQ_TILES(X) X(80, 128, large, 128, 64, 8, 2, 4, 2, false, 1)
#define FA2_BWD_PRE_ALONE(X)
#define FA2_DECODE_TILES(X)
#define FA2_LADDER(X)
