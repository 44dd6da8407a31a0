// dev wrapper (not in the tree): kernel lists cut to the D64 sm_80 rows (sm_90 build)
#include "traits.cuh"
#include "ladder/ladder.cuh"
#undef FA2_FWD_TILES
#undef FA2_BWD_TILES
#undef FA2_BWD_KVQ_TILES
#undef FA2_BWD_PRE_ALONE
#undef FA2_DECODE_TILES
#undef FA2_LADDER
#define FA2_FWD_TILES(X) X(80, 64, 128, 128, 4, 2, 2, true, 1) X(80, 128, 128, 64, 4, 2, 2, false, 1)
#define FA2_BWD_TILES(X) X(80, 64, (128, 64, 4, 2, 16, false, 1), (128, 64, 4, 2, 32, false, 1))
#define FA2_BWD_KVQ_TILES(X)
#define FA2_BWD_PRE_ALONE(X)
#define FA2_DECODE_TILES(X)
#define FA2_LADDER(X)
