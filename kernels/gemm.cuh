// gemm.cuh: the two warp-level products every FA2 pass is made of, on
// tensor-core fragments read from swizzled shared memory (tile_io.cuh):
//   gemm_abt  c  = A B^T over the head dim   (S = Q K^T; dP = dO V^T; S^T = K Q^T)
//   gemm_pb   c += P B over a block of rows  (O += P V; dV += P^T dO; dQ += dS K)
// and pack_a, which turns fp32 accumulators into the fp16 A fragments of gemm_pb.
// E (default __half) is the operands' element type: __nv_bfloat16 selects the
// bf16 mma (sm_80 path only); the data movement is the same 16-bit bits.
#pragma once
#include "tile_io.cuh"

namespace fa2 {

// The warp's A fragments (MT m16 row tiles from row arow, all of D) kept in registers.
template <int D, int MT>
__device__ __forceinline__ void load_frags(uint32_t (&af)[MT][D / 16][4], const LdAddr<D, kRowsFirst>& la, uint32_t abase,
                                           int arow) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(af[i][kk], la.at(abase, arow + 16 * i, 2 * kk));
}

// c = A B^T over the head dim. A: the warp's MT m16 row tiles (rows arow.. of the
// tile at smem address abase, or their fragments af when Regs); B: N rows from
// brow of the tile at bbase, read in kChunksFirst order (as K in S = Q K^T); N
// a multiple of 8 (an odd n8 tile last, by the x4's first two matrices).
template <int A, int D, int MT, int N, bool Regs, class E = __half>
__device__ __forceinline__ void gemm_abt(float (&c)[MT][N / 8][4], const uint32_t (&af)[Regs ? MT : 1][Regs ? D / 16 : 1][4],
                                         const LdAddr<D, kRowsFirst>& la, uint32_t abase, int arow,
                                         const LdAddr<D, kChunksFirst>& lk, uint32_t bbase, int brow) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[i][j][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if constexpr (Regs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[i][e] = af[i][kk][e];
      } else {
        ldmatrix_x4(a[i], la.at(abase, arow + 16 * i, 2 * kk));
      }
    }
#pragma unroll
    for (int jj = 0; jj < N / 16; ++jj) {
      uint32_t bk[4];  // b0, b1 of rows brow+16jj+0..7, then of +8..15
      ldmatrix_x4(bk, lk.at(bbase, brow + 16 * jj, 2 * kk));
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mma_k16<A, E>(c[i][2 * jj], a[i], bk[0], bk[1]);
        mma_k16<A, E>(c[i][2 * jj + 1], a[i], bk[2], bk[3]);
      }
    }
    if constexpr (N % 16 == 8) {
      uint32_t b0, b1;  // rows brow+N-8..N-1 (a multiple of 8: the swizzle key is the lane's row's)
      ldmatrix_x2(b0, b1, lk.at(bbase, brow + N - 8, 2 * kk));
#pragma unroll
      for (int i = 0; i < MT; ++i) mma_k16<A, E>(c[i][N / 8 - 1], a[i], b0, b1);
    }
  }
}

// c += P B: P (fp16 A fragments over k = N) times the N rows from brow of the
// tile at bbase, read .trans (as V in O += P V): all D columns, or the first DC
// (bbase advanced by a whole 64-column slab picks later ones: the swizzle stays
// inside a slab).
template <int A, int D, int MT, int N, class E = __half, int DC = D>
__device__ __forceinline__ void gemm_pb(float (&c)[MT][DC / 8][4], const uint32_t (&pf)[MT][N / 16][4],
                                        const LdAddr<D, kRowsFirst>& la, uint32_t bbase, int brow) {
  static_assert(DC == D || DC % 64 == 0, "whole 64-column slabs");
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
#pragma unroll
    for (int dd = 0; dd < DC / 16; ++dd) {
      uint32_t bv[4];
      ldmatrix_x4_trans(bv, la.at(bbase, brow + 16 * kk, 2 * dd));
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mma_k16<A, E>(c[i][2 * dd], pf[i][kk], bv[0], bv[1]);
        mma_k16<A, E>(c[i][2 * dd + 1], pf[i][kk], bv[2], bv[3]);
      }
    }
  }
}

// fp32 accumulators (C layout) -> A fragments of element type E (fp16 unless
// the bf16 forward): k16 step kk takes n-tiles 2kk, 2kk+1.
template <int MT, int N, class E = __half>
__device__ __forceinline__ void pack_a(const float (&s)[MT][N / 8][4], uint32_t (&pf)[MT][N / 16][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) {
      pf[i][kk][0] = pack2<E>(s[i][2 * kk][0], s[i][2 * kk][1]);
      pf[i][kk][1] = pack2<E>(s[i][2 * kk][2], s[i][2 * kk][3]);
      pf[i][kk][2] = pack2<E>(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
      pf[i][kk][3] = pack2<E>(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
    }
}

// pack_a across column groups (BwdTile's ColGroups): the CG warps that share
// m16 row tiles each computed NJ of the chunk's CG*NJ n8 tiles (group g tiles
// g*NJ..), and every warp needs the A fragments of all of them. Lane l of each
// group holds the same fragment positions, so lane l puts its packed halves in
// x (MT * CG*NJ * 32 uint2 per row group) and, after the group's barrier, gets
// the others' at its own index.
template <int MT, int NJ, int CG, class E>
__device__ __forceinline__ void share_put(const float (&s)[MT][NJ][4], uint2* x, int g, int lane) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      x[(i * CG * NJ + g * NJ + j) * 32 + lane] = make_uint2(pack2<E>(s[i][j][0], s[i][j][1]), pack2<E>(s[i][j][2], s[i][j][3]));
}
template <int MT, int NJ, int CG, class E>
__device__ __forceinline__ void share_get(const float (&s)[MT][NJ][4], uint32_t (&pf)[MT][CG * NJ / 2][4], const uint2* x, int g,
                                          int lane) {
  static_assert(CG * NJ % 2 == 0, "whole k16 steps");
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int jt = 0; jt < CG * NJ; ++jt) {  // the chunk's n8 tile jt: k16 step jt/2, registers 2(jt&1), +1
      const int j = jt % NJ;
      const uint2 h = jt / NJ == g ? make_uint2(pack2<E>(s[i][j][0], s[i][j][1]), pack2<E>(s[i][j][2], s[i][j][3]))
                                   : x[(i * CG * NJ + jt) * 32 + lane];
      pf[i][jt / 2][2 * (jt & 1)] = h.x;
      pf[i][jt / 2][2 * (jt & 1) + 1] = h.y;
    }
}

// The CG warps of one row group meet (bar.sync 1 + row group; 0 is __syncthreads').
struct GroupSync {
  int id, threads;
  __device__ __forceinline__ void operator()() const { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
};

}  // namespace fa2
