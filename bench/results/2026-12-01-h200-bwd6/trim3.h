// dev wrapper: only the D64 large single pass (and its pre), for ptxas -v on sm_80/86/89
#include "traits.cuh"
#include "ladder/ladder.cuh"
#undef FA2_FWD_TILES
#undef FA2_BWD_TILES
#undef FA2_BWD_KVQ_TILES
#undef FA2_BWD_PRE_ALONE
#undef FA2_DECODE_TILES
#undef FA2_LADDER
#define FA2_FWD_TILES(X)
#define FA2_BWD_TILES(X)
#define FA2_BWD_KVQ_TILES(X) X(80, 64, large, 192, 64, 8, 2, 4, 2, false, 1)
#define FA2_BWD_PRE_ALONE(X) X(80, 64)
#define FA2_DECODE_TILES(X)
#define FA2_LADDER(X)
template <> struct BwdKVQTraits<80, 64, true> { using type = BwdKVQTile<80, 64, 192, 64, 8, 2, 4, 2, false, 1>; };
