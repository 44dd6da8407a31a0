// tiles.cu: host program run by build.sh; prints the tile table of traits.cuh
// (one line per shipped symbol) for resources.md, which internal/kernels' test
// compares with its Variant table.
#include <cstdio>
#include "traits.cuh"

template <int A, int D>
void row() {
  using T = typename FwdTraits<A, D>::type;
  for (int causal = 0; causal < 2; ++causal)
    std::printf("| fa2_fwd_sm%d_d%d%s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", A, D, causal ? "_causal" : "",
                A, D, causal, T::kBr, T::kBc, T::kWarps, T::kStages, T::kSplits, T::kQRegs ? "yes" : "no",
                T::kSmemBytes);
}

int main() {
  row<75, 32>(); row<75, 64>(); row<75, 96>(); row<75, 128>();
  row<80, 32>(); row<80, 64>(); row<80, 96>(); row<80, 128>(); row<80, 256>();
  return 0;
}
