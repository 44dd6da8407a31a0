// rung4_ldmatrix.cuh: rung 4 of the kernel ladder. Rung 3 reads its fragments
// 32 (or 16) bits per lane per load, and its row-major tiles put the rows a
// warp reads in the same shared-memory banks. This edit of it stores every
// tile in plain row-major 16-byte chunks, without rung 4's XOR swizzle by
// row, so the 8 rows one ldmatrix reads share bank groups; one ldmatrix.x4 loads a
// whole 16x16 fragment for the warp; .trans reads V transposed, so its B
// fragments need no 16-bit shuffling. The products are the shipped kernels'
// own (gemm.cuh), as is the epilogue: O goes out through shared memory in
// 16-byte row stores. Copies are still synchronous: load, wait, compute.
#pragma once
#include "common.cuh"
#include "../mask.cuh"
#include "../softmax.cuh"
#include "../gemm.cuh"
template <> struct Swizzle<64> {  // rows stored plainly: chunk c of row r at r * 64 + 8c
  static constexpr int kChunks = 8;
  __device__ static int key(int) { return 0; }
  __device__ static int offset(int row, int c) { return row * 64 + (c << 3); }
};

namespace fa2 {
namespace ladder {

struct Rung4 {
  static constexpr int kBr = 64, kBc = 64, kThreads = 128;  // 4 warps x 16 query rows

  template <int D, bool kCausal>
  __device__ __forceinline__ static void run(const FwdParams& p) {
    constexpr int Br = kBr, Bc = kBc, NT = kThreads;
    constexpr int NS = Bc / 8, NO = D / 8;
    __shared__ __align__(128) __half sQ[Br * D], sK[Bc * D], sV[Bc * D];
    const Cta c(p, Br);
    const int tid = threadIdx.x, lane = tid & 31;
    const int wrow = 16 * (tid >> 5);
    const int rows_q = min(Br, p.nq - c.m0);
    const KeyBlocks kb = key_blocks<Br, Bc, kCausal>(c.m0, p.nq, p.nk);
    const LdAddr<D, kRowsFirst> la(lane);    // Q, V: ldmatrix row addresses after the swizzle
    const LdAddr<D, kChunksFirst> lk(lane);  // K
    const uint32_t aQ = smem_u32(sQ), aK = smem_u32(sK), aV = smem_u32(sV);
    const uint32_t no_q[1][1][4] = {};       // Q stays in shared memory (gemm_abt's Regs = false)

    load_tile<75, Br, D, NT>(sQ, c.q, p.q_row_stride, rows_q, tid);  // 16-byte global loads, swizzled stores
    float o[1][NO][4] = {};
    OnlineSoftmax<1> sm;
    sm.init();
    for (int n = 0; n < kb.n_end; ++n) {
      __syncthreads();
      load_tile<75, Bc, D, NT>(sK, c.k + n * Bc * p.k_row_stride, p.k_row_stride, p.nk - n * Bc, tid);
      load_tile<75, Bc, D, NT>(sV, c.v + n * Bc * p.v_row_stride, p.v_row_stride, p.nk - n * Bc, tid);
      __syncthreads();
      float s[1][NS][4];
      gemm_abt<75, D, 1, Bc, false>(s, no_q, la, aQ, wrow, lk, aK, 0);  // S = Q K^T
      if (n >= kb.n_mask) apply_mask<1, NS, kCausal>(s, c.m0 + wrow, n * Bc, lane, p.nq, p.nk);
      sm.step(s, o, p.scale_log2);
      uint32_t pf[1][Bc / 16][4];
      pack_a<1, Bc>(s, pf);
      gemm_pb<75, D, 1, Bc>(o, pf, la, aV, 0);  // O += P V
    }

    float lse[1][2];
    sm.finish(o, p.scale, lse);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = wrow + g + 8 * hh;
      if (t == 0 && row < rows_q) c.lse[row] = lse[0][hh];
    }
    __syncthreads();  // every warp is done reading Q: stage O over it
    stage_rows<D, 1>(o, 1.f, sQ, wrow, lane);
    __syncthreads();
    store_rows<Br, D, NT>(sQ, c.o, p.o_row_stride, rows_q, tid);
  }
};

}  // namespace ladder
}  // namespace fa2
