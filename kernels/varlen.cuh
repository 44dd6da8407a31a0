// varlen.cuh: where a CTA's sequence lives. Dense: batch b of (B, N, H, D)
// tensors, every sequence nq x nk. Varlen (the fa2_*_varlen kernels, forward
// and backward):
// sequence b of packed (1, total, H, D) tensors, its rows and keys read once
// per CTA from the cumulative lengths; each sequence is its own problem
// (bottom-right causal on its own nq x nk).
#pragma once
#include <cstdint>

namespace fa2 {

struct Seq {
  int64_t q0, k0;  // the sequence's first query (and output) row and first key row
  int nq, nk;
};

// Whether a call is varlen: the _varlen kernels (kVarlen) always; the
// modified kernels (kMod) when the parameters carry cumulative lengths. The
// modifier kernels take packed sequences at run time (a few instructions at
// entry, none per block) so that the fatbin needs no _varlen twin of each
// modifier combination (the _mod family is already a quarter of it). For the
// other kernels it folds to the constant kVarlen: their code is unchanged.
template <bool kVarlen, bool kMod, class P>
__device__ __forceinline__ bool varlen_call(const P& p) {
  return kVarlen || (kMod && p.cu_seqlens_q != nullptr);
}

// seq_of is sequence b of a varlen parameter block (FwdParams or BwdParams).
template <class P>
__device__ __forceinline__ Seq seq_of(const P& p, int b) {
  const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
  return Seq{q0, k0, p.cu_seqlens_q[b + 1] - q0, p.cu_seqlens_k[b + 1] - k0};
}

// SeqView is a CTA's problem, dense or varlen: vl whether the call is varlen
// (varlen_call), sq its sequence (zero when dense), nq() and nk() its lengths.
// Dense, nq() and nk() read p.nq and p.nk where the plain kernels read them,
// so that their code stays the same.
template <class P>
struct SeqView {
  const P& p;
  bool vl;
  Seq sq;
  __device__ __forceinline__ int nq() const { return vl ? sq.nq : p.nq; }
  __device__ __forceinline__ int nk() const { return vl ? sq.nk : p.nk; }
};

// seq_view is the view of batch b (varlen: sequence b), the prologue of every
// kernel that takes packed sequences (kVarlen, kMod: as varlen_call).
template <bool kVarlen, bool kMod, class P>
__device__ __forceinline__ SeqView<P> seq_view(const P& p, int b) {
  const bool vl = varlen_call<kVarlen, kMod>(p);
  return SeqView<P>{p, vl, vl ? seq_of(p, b) : Seq{}};
}

}  // namespace fa2
