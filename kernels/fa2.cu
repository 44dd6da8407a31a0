// fa2.cu: the shipped kernels, one extern "C" symbol per (arch path, head dim,
// causal): fa2_fwd_sm{75,80}_d{D}[_causal]. Tiles come from traits.cuh; the Go
// table (internal/kernels/table.go) lists the same symbols.
#include "fwd.cuh"

#define FA2_FWD(ARCH, D)                                                                   \
  extern "C" __global__ void __launch_bounds__(FwdTraits<ARCH, D>::type::kThreads,        \
                                               FwdTraits<ARCH, D>::type::kMinBlocks)      \
      fa2_fwd_sm##ARCH##_d##D(const FwdParams p) {                                         \
    fa2::fwd_entry<FwdTraits<ARCH, D>::type, false>(p);                                    \
  }                                                                                        \
  extern "C" __global__ void __launch_bounds__(FwdTraits<ARCH, D>::type::kThreads,        \
                                               FwdTraits<ARCH, D>::type::kMinBlocks)      \
      fa2_fwd_sm##ARCH##_d##D##_causal(const FwdParams p) {                                \
    fa2::fwd_entry<FwdTraits<ARCH, D>::type, true>(p);                                     \
  }

FA2_FWD(75, 32)
FA2_FWD(75, 64)
FA2_FWD(75, 96)
FA2_FWD(75, 128)
#ifndef FA2_SM75_ONLY  // fa2_sm75.ptx holds the Turing kernels alone
FA2_FWD(80, 32)
FA2_FWD(80, 64)
FA2_FWD(80, 96)
FA2_FWD(80, 128)
FA2_FWD(80, 256)
#endif
