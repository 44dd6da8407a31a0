// fa2_sm90a.cu: the Hopper kernels. The forward, fa2_fwd_sm90a_d{D}[_bf16][_causal]
// with its varlen twins fa2_fwd_sm90a_d{D}[_bf16][_causal]_varlen (packed sequences:
// FwdParams' cumulative lengths, seqs and max_nq) and the modified
// fa2_fwd_sm90a_d{D}[_bf16]_mod[_cap][_alibi], for exactly the rows
// of traits.cuh's FA2_SM90A_TILES, and the short-call kernels
// fa2_fwd_sm90a_d{D}[_bf16][_causal]_short of FA2_SM90A_SHORT_TILES; the backward (below) for those of
// FA2_SM90A_BWD_TILES. Built by build.sh with the private nvcc 12.4
// (kernels/cuda12.sh) as SASS for sm_90a only, into fa2_sm90a.cubin, a module
// of its own beside fa2_fwd.fatbin (which nvcc 11.8 builds and whose sm_90
// image the forced sm_80 path keeps running on an H100/H200). The forward's
// argument is an Sm90FwdArgs (params.cuh): the tensor maps of q, k, v, then
// FwdParams. Launch: the persistent grid (min(ceil(Nq/Br) * B*Hq, SMs), 1, 1;
// varlen: Nq the longest sequence's rows, B the sequences),
// T::kThreads threads, T::kSmemBytes of dynamic shared memory (T::kBiasSmemBytes in
// the ALiBi kernels without the softcap: mask.cuh's sm90_alibi_gemm).
#include "fwd_sm90.cuh"

// The modified forward (a window, softcap, ALiBi; fwd_sm90.cuh's kMod):
// fa2_fwd_sm90a_d{D}[_bf16]_mod[_cap][_alibi], as fwd.cu's FA2_FWD_MOD on sm_80.
#define FA2_SM90A_MOD(D, ESFX, E, MSFX, BITS)                                                                  \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::mod::kThreads, 1)                                \
      fa2_fwd_sm90a_d##D##ESFX##_mod##MSFX(const __grid_constant__ Sm90FwdArgs a) {                            \
    sm90::fwd_kernel<Sm90Traits<D>::mod, false, BITS, E>(a);                                                   \
  }
// Every kernel of head dim D on element type E (symbol suffix ESFX after d{D}).
#define FA2_SM90A_TYPED(D, ESFX, E)                                                                             \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D##ESFX(const __grid_constant__ Sm90FwdArgs a) {                                        \
    sm90::fwd_kernel<Sm90Traits<D>::type, false, 0, E>(a);                                                     \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D##ESFX##_causal(const __grid_constant__ Sm90FwdArgs a) {                               \
    sm90::fwd_kernel<Sm90Traits<D>::type, true, 0, E>(a);                                                      \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D##ESFX##_varlen(const __grid_constant__ Sm90FwdArgs a) {                               \
    sm90::fwd_kernel<Sm90Traits<D>::type, false, 0, E, true>(a);                                               \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(Sm90Traits<D>::type::kThreads, 1)                               \
      fa2_fwd_sm90a_d##D##ESFX##_causal_varlen(const __grid_constant__ Sm90FwdArgs a) {                        \
    sm90::fwd_kernel<Sm90Traits<D>::type, true, 0, E, true>(a);                                                \
  }                                                                                                             \
  FA2_SM90A_MOD(D, ESFX, E, , fa2::kModOn)                                                                      \
  FA2_SM90A_MOD(D, ESFX, E, _cap, fa2::kModOn | fa2::kModCap)                                                   \
  FA2_SM90A_MOD(D, ESFX, E, _alibi, fa2::kModOn | fa2::kModALiBi)                                               \
  FA2_SM90A_MOD(D, ESFX, E, _cap_alibi, fa2::kModOn | fa2::kModCap | fa2::kModALiBi)
// fp16, and the bf16 twins on the same tiles (fa2_fwd_sm90a_d{D}_bf16*).
#define FA2_SM90A_FWD(D, ...) FA2_SM90A_TYPED(D, , __half) FA2_SM90A_TYPED(D, _bf16, __nv_bfloat16)
FA2_SM90A_TILES(FA2_SM90A_FWD)

// The short-call tiles (FA2_SM90A_SHORT_TILES): fa2_fwd_sm90a_d{D}[_bf16][_causal]_short.
#define FA2_SM90A_SHORT_ONE(D, ESFX, E, CSFX, C)                                                                \
  extern "C" __global__ void __launch_bounds__(Sm90ShortTraits<D>::type::kThreads, 1)                          \
      fa2_fwd_sm90a_d##D##ESFX##CSFX##_short(const __grid_constant__ Sm90FwdArgs a) {                           \
    sm90::fwd_kernel<Sm90ShortTraits<D>::type, C, 0, E>(a);                                                     \
  }
#define FA2_SM90A_SHORT(D, ...)                                                                                  \
  FA2_SM90A_SHORT_ONE(D, , __half, , false) FA2_SM90A_SHORT_ONE(D, , __half, _causal, true)                    \
  FA2_SM90A_SHORT_ONE(D, _bf16, __nv_bfloat16, , false) FA2_SM90A_SHORT_ONE(D, _bf16, __nv_bfloat16, _causal, true)
FA2_SM90A_SHORT_TILES(FA2_SM90A_SHORT)

// The Hopper backward (bwd_sm90.cuh), for exactly the rows of traits.cuh's
// FA2_SM90A_BWD_TILES: fa2_bwd_pre_sm90a_d{D}[_bf16], the single pass
// fa2_bwd_dkdvq[det]_sm90a_d{D}[_bf16][_causal] (det: the fixed dQ order, on
// the rows whose ordered flag is true) and
// fa2_bwd_dqconv_sm90a_d{D}[_bf16]. The argument is an Sm90BwdArgs
// (params.cuh). Launch: pre and dqconv (ceil(Nq/Br), B*Hq, 1) x 256 threads,
// no dynamic shared memory; the single pass (ceil(Nk/Bc), B*Hkv, 1) x
// T::kThreads, T::kSmemBytes.
#include "bwd_sm90.cuh"

#define FA2_SM90A_BWD_PASS(D, ESFX, E, DET, KDET, CSFX, C)                                                       \
  extern "C" __global__ void __launch_bounds__(Sm90BwdTraits<D>::type::kThreads, 1)                             \
      fa2_bwd_dkdvq##DET##_sm90a_d##D##ESFX##CSFX(const __grid_constant__ Sm90BwdArgs a) {                      \
    sm90::bwd_kernel<Sm90BwdTraits<D>::type, C, E, KDET>(a);                                                     \
  }
#define FA2_SM90A_BWD_TYPED(D, ESFX, E)                                                                          \
  extern "C" __global__ void __launch_bounds__(256) fa2_bwd_pre_sm90a_d##D##ESFX(const __grid_constant__ Sm90BwdArgs a) { \
    sm90::bwd_pre<Sm90BwdTraits<D>::type, E>(a);                                                                 \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) fa2_bwd_dqconv_sm90a_d##D##ESFX(const __grid_constant__ Sm90BwdArgs a) { \
    sm90::bwd_dqconv<Sm90BwdTraits<D>::type, E>(a);                                                              \
  }                                                                                                              \
  FA2_SM90A_BWD_PASS(D, ESFX, E, , false, , false)                                                               \
  FA2_SM90A_BWD_PASS(D, ESFX, E, , false, _causal, true)
// The ordered twins, for the rows whose ordered flag is true.
#define FA2_SM90A_BWD_ORDERED_true(D, ESFX, E)                                                                   \
  FA2_SM90A_BWD_PASS(D, ESFX, E, det, true, , false)                                                             \
  FA2_SM90A_BWD_PASS(D, ESFX, E, det, true, _causal, true)
#define FA2_SM90A_BWD_ORDERED_false(D, ESFX, E)
#define FA2_SM90A_BWD(D, BR, BC, S, ORD)                                                                         \
  FA2_SM90A_BWD_TYPED(D, , __half) FA2_SM90A_BWD_TYPED(D, _bf16, __nv_bfloat16)                                  \
  FA2_SM90A_BWD_ORDERED_##ORD(D, , __half) FA2_SM90A_BWD_ORDERED_##ORD(D, _bf16, __nv_bfloat16)
FA2_SM90A_BWD_TILES(FA2_SM90A_BWD)
