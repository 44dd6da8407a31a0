// tile_io.cuh: moving 16-bit tiles (fp16, or bf16 bits typed __half) between global and swizzled shared memory,
// and the ldmatrix addresses that read them back; shared by fwd.cuh and bwd.cuh.
#pragma once
#include <cuda_fp16.h>
#include "traits.cuh"
#include "mma.cuh"

namespace fa2 {

// ldmatrix addressing. A slab is 16 rows x 2 chunks (16 x 16 fp16) = four 8x8
// matrices; lane l gives one row address of matrix l/8. Two lane orders:
//   kRowsFirst (Q as A, V as B via .trans): matrices (rows 0-7, 8-15) x (chunk 2c, 2c+1),
//     i.e. a0..a3 of an A fragment, or b0,b1 of n-tile 2c then of 2c+1 for V;
//   kChunksFirst (K as B): (chunk 2c, 2c+1) x (rows 0-7, 8-15), i.e. b0,b1 of key
//     n-tile 0 then of n-tile 1, so each mma's B pair is two adjacent registers
//     (the other order costs two register moves per mma).
// The swizzle only touches the low chunk bits, so the lane's XOR part takes
// (M+1)/2 values, precomputed once; the rest of every address is an immediate.
enum LdOrder { kRowsFirst, kChunksFirst };
template <int D, LdOrder O>
struct LdAddr {
  static constexpr int M = (D / 8) % 8 == 0 ? 7 : 3;
  static constexpr int X = (M + 1) / 2;
  uint32_t lane_row;  // byte offset of the lane's row inside a slab
  uint32_t x[X];      // byte offset of chunk (2u + hi) after the swizzle
  __device__ __forceinline__ explicit LdAddr(int lane) {
    const int row = O == kRowsFirst ? (lane & 15) : ((lane & 7) | ((lane >> 4) << 3));
    const int hi = O == kRowsFirst ? (lane >> 4) : ((lane >> 3) & 1);
    lane_row = row * D * 2;
#pragma unroll
    for (int u = 0; u < X; ++u) x[u] = ((2 * u + hi) ^ Swizzle<D>::key(row)) * 16;
  }
  // Byte address of the lane's matrix row for slab row `row0` (multiple of 16) and chunk pair c2 (even).
  __device__ __forceinline__ uint32_t at(uint32_t base, int row0, int c2) const {
    return base + lane_row + row0 * D * 2 + (c2 & ~M) * 16 + x[(c2 & M) >> 1];
  }
};

// Tile copies: thread tid moves chunk c = tid % CP of rows r0 + k*RS, r0 = tid / CP,
// RS = NT / CP, with CP = D/8 rounded up to a power of two (D 96: 12 of 16 lanes
// busy). A fixed chunk per thread keeps each step's addresses one add apart
// instead of a division per chunk (which the compiler hoists into registers).
template <int ROWS, int D, int NT>
struct TileMap {
  static constexpr int C = D / 8;
  static constexpr int CP = C <= 4 ? 4 : C <= 8 ? 8 : C <= 16 ? 16 : 32;
  static constexpr int RS = NT / CP, N = ROWS / RS;
  static_assert(NT % CP == 0 && ROWS % RS == 0, "tile copy must split evenly over the CTA");
  int r0, c;
  __device__ __forceinline__ explicit TileMap(int tid) : r0(tid / CP), c(tid % CP) {}
  __device__ __forceinline__ bool active() const { return CP == C || c < C; }
};

// Copy ROWS x D fp16 from global (row stride `ld` elements) to swizzled smem with
// cp.async; rows >= valid are zero-filled (keys past Nk must be 0 in V: P is 0
// there but 0 * garbage may be NaN).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void cp_tile(__half* s, const __half* g, int64_t ld, int valid, int tid) {
  const TileMap<ROWS, D, NT> m(tid);
  if (!m.active()) return;
  const __half* src = g + m.r0 * ld + m.c * 8;
  const int lim = valid - m.r0;  // row r0 + k*RS exists iff k*RS < lim (compare with an immediate)
#pragma unroll
  for (int k = 0; k < m.N; ++k) {
    const bool ok = k * m.RS < lim;
    cp_async_16(smem_u32(s + Swizzle<D>::offset(m.r0 + k * m.RS, m.c)), ok ? src : g, ok ? 16 : 0);
    src += m.RS * ld;
  }
}

// The Turing path's prefetch: one tile held in registers between the global
// load (issued a whole step early) and the shared-memory store.
template <int ROWS, int D, int NT>
struct RegTile {
  using Map = TileMap<ROWS, D, NT>;
  uint4 r[Map::N];
  __device__ __forceinline__ void load(const __half* g, int64_t ld, int valid, int tid) {
    const Map m(tid);
    if (!m.active()) return;
    const __half* src = g + m.r0 * ld + m.c * 8;
    const int lim = valid - m.r0;
#pragma unroll
    for (int k = 0; k < Map::N; ++k) {
      r[k] = k * Map::RS < lim ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0, 0, 0, 0);
      src += Map::RS * ld;
    }
  }
  __device__ __forceinline__ void store(__half* s, int tid) const {
    const Map m(tid);
    if (!m.active()) return;
#pragma unroll
    for (int k = 0; k < Map::N; ++k)
      *reinterpret_cast<uint4*>(s + Swizzle<D>::offset(m.r0 + k * Map::RS, m.c)) = r[k];
  }
};

// Rows x D fp16 from global into swizzled smem: cp.async on sm_80 (the caller
// commits), through registers on Turing. Rows >= valid are zero-filled.
template <int A, int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile(__half* s, const __half* g, int64_t ld, int valid, int tid) {
  if constexpr (A == 80) {
    cp_tile<ROWS, D, NT>(s, g, ld, valid, tid);
  } else {
    RegTile<ROWS, D, NT> r;
    r.load(g, ld, valid, tid);
    r.store(s, tid);
  }
}

// Epilogue, part 1: the warp's accumulator rows times mul, as E (fp16, or bf16
// for the bf16 backward), into the swizzled tile at stage (no other warp may
// still read it): all D columns, or DC of them from stage (advanced by whole
// 64-column slabs, as gemm_pb's).
template <int D, int MT, class E = __half, int DC = D>
__device__ __forceinline__ void stage_rows(const float (&c)[MT][DC / 8][4], float mul, __half* stage, int wrow, int lane) {
  static_assert(DC == D || DC % 64 == 0, "whole 64-column slabs");
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = wrow + 16 * i + g + 8 * hh;
#pragma unroll
      for (int n = 0; n < DC / 8; ++n)
        *reinterpret_cast<uint32_t*>(stage + Swizzle<D>::offset(row, n) + 2 * t) =
            pack2<E>(c[i][n][2 * hh] * mul, c[i][n][2 * hh + 1] * mul);
    }
}

// Epilogue, part 2 (after a barrier): the first `valid` rows of the staged tile
// to global memory in 16-byte stores.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void store_rows(const __half* stage, __half* g, int64_t ld, int valid, int tid) {
  constexpr int C = D / 8;
  static_assert(ROWS * C % NT == 0, "the staged tile must split evenly over the CTA");
#pragma unroll
  for (int it = 0; it < ROWS * C / NT; ++it) {
    const int idx = it * NT + tid, row = idx / C, c = idx % C;
    if (row < valid)
      *reinterpret_cast<uint4*>(g + row * ld + c * 8) = *reinterpret_cast<const uint4*>(stage + Swizzle<D>::offset(row, c));
  }
}

// Zero rows for a CTA with nothing to add (no visible key or query).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void store_zero_rows(__half* g, int64_t ld, int valid, int tid) {
  constexpr int C = D / 8;
  for (int idx = tid; idx < min(valid, ROWS) * C; idx += NT)
    *reinterpret_cast<uint4*>(g + (idx / C) * ld + (idx % C) * 8) = make_uint4(0, 0, 0, 0);
}

}  // namespace fa2
