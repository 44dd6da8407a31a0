// decode.cuh: the KV-cache decode forward (flash-decoding), both arch paths.
//
// Decode reads every cached K and V row once per step for a handful of query
// rows, so it is bound by HBM bandwidth, not by the tensor cores. Two things
// keep the bytes moving:
//   - GQA packing: a CTA owns one (batch, kv head) and the Nq x Hq/Hkv query
//     rows that read it, packed into one m16 tile (packed row r = query row
//     r / G of query head hk*G + r % G, G = Hq/Hkv), so each K/V row read from
//     HBM feeds every query head of its group; more than 16 packed rows take
//     more tiles (grid z), which read the same K/V again, mostly from L2;
//   - split-KV: grid x splits the key blocks a tile sees into equal ranges,
//     so a small B*Hkv still fills the GPU. Each split writes a partial O and
//     its LSE (fp32 workspace); the group's last CTAs to finish merge them by
//     their LSEs (decode_merge_splits), so a call is one launch. With one
//     split the CTA writes O and the LSE itself.
// Inside a CTA the warps share the rows and split each block of Bc keys
// (Bw = Bc/Warps each): every warp keeps its own m, l, O, and the warps are
// merged by their LSEs at the end, exactly as the splits are (lse_merge).
// The tensor-core products are the forward's (gemm.cuh); on Turing the
// m16n8k8 mma computes 16 rows where a CUDA-core dot product would compute
// only the live ones, but either way the SM waits on HBM, and one code path
// for both archs is worth more than the idle FLOPs.
//
// The cache is contiguous (row n of batch b at k + b*batch_stride +
// n*row_stride) or paged (block_table: row n of batch b in block
// table[b][n / page] at row n % page; batch_stride is then a block's), the
// division done once per 16-row group (CacheBlock).
// Keys past seqlens[b] are zero-filled in shared memory and masked. Masks are
// bottom-right per sequence (off = len_b - Nq): query row i sees key j iff
// i+off-left <= j <= i+off+right (causal: right 0; -1 leaves a side open),
// and a tile reads only the key blocks its rows see (window_blocks_rows), so a
// sliding window reads its window, not the cache. Softcap and ALiBi act on
// the scores as in the modified forward (mask.cuh's ScoreMods: the softmax
// runs in units of the cap); they, the window and causal are run-time values
// of the one kernel: decode waits on HBM, and a score's few extra ops are
// free where a second set of kernels is not.
#pragma once
#include <cuda_fp16.h>
#include "params.cuh"
#include "traits.cuh"
#include "mma.cuh"
#include "softmax.cuh"
#include "tile_io.cuh"
#include "gemm.cuh"
#include "mask.cuh"
#include "entry.cuh"
#include "n8.cuh"

namespace fa2 {

// The rows of one K or V head of batch b's cache.
struct CacheRows {
  const __half* base;  // the head's first element in block/batch 0
  int64_t batch_stride, row_stride;
  const int32_t* table;  // batch b's block-table row, or null (contiguous)
  int page;
};

// Where this thread's rows of one block of keys (TileMap's rows) lie in the
// cache, found a block ahead of the copy and shared by K and V (their strides
// apply at the copy). Pages are multiples of 16 rows and blocks start at
// multiples of 16, so a 16-row group lies in one page: one block-table load
// and one division by the runtime page size per group, none per row. With a
// row step RS < 16 (RS divides 16, r0 < RS) row r0 + k*RS is in group
// k*RS/16, delta(k) rows after the thread's first row there (compile time).
constexpr int kPageMultiple = 16;  // a block size divides by it: flashattn.PageMultiple
template <int ROWS, int D, int NT>
struct CacheBlock {
  using Map = TileMap<ROWS, D, NT>;
  static constexpr int P = kPageMultiple, G = Map::RS < P ? Map::N * Map::RS / P : Map::N;  // groups per thread
  static_assert(Map::RS >= P ? Map::RS % P == 0 : P % Map::RS == 0, "rows per step must tile 16-row groups");
  __device__ __forceinline__ static constexpr int group(int k) { return Map::RS < P ? k * Map::RS / P : k; }
  __device__ __forceinline__ static constexpr int delta(int k) { return Map::RS < P ? k * Map::RS - P * group(k) : 0; }
  int32_t blk[G];  // the group's page (0 when contiguous: base holds batch b)
  int32_t row[G];  // the thread's first row of the group, within its page (or the sequence)
  __device__ __forceinline__ void load(const CacheRows& c, int n0, int valid, int tid) {
    const Map m(tid);
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int r = m.r0 + (Map::RS < P ? P * j : j * Map::RS), n = n0 + r;
      const int q = c.table && r < valid ? n / c.page : 0;
      blk[j] = c.table && r < valid ? c.table[q] : 0;
      row[j] = n - q * c.page;
    }
  }
  // Row r0 + k*RS, column chunk ch, of the head c describes.
  __device__ __forceinline__ const __half* addr(const CacheRows& c, int k, int ch) const {
    return c.base + static_cast<int64_t>(blk[group(k)]) * c.batch_stride +
           static_cast<int64_t>(row[group(k)] + delta(k)) * c.row_stride + ch * 8;
  }
};

// This thread's rows of a block (its CacheBlock cb) into swizzled smem
// (cp.async; the caller commits); rows >= valid are zero-filled (V must be 0
// there: P is 0 but 0 * garbage may be NaN).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void cp_cache_tile(__half* s, const CacheRows& c, const CacheBlock<ROWS, D, NT>& cb, int valid,
                                              int tid) {
  const TileMap<ROWS, D, NT> m(tid);
  if (!m.active()) return;
  if (!c.table) {  // contiguous: the thread's rows are RS rows apart, one add each (as cp_tile), not addr's 64-bit products
    const __half* src = c.base + static_cast<int64_t>(cb.row[0]) * c.row_stride + m.c * 8;
    const int lim = valid - m.r0;
#pragma unroll
    for (int k = 0; k < m.N; ++k) {
      const bool ok = k * m.RS < lim;
      cp_async_16(smem_u32(s + Swizzle<D>::offset(m.r0 + k * m.RS, m.c)), ok ? src : c.base, ok ? 16 : 0);
      src += m.RS * c.row_stride;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < m.N; ++k) {
    const int r = m.r0 + k * m.RS;
    const bool ok = r < valid;
    cp_async_16(smem_u32(s + Swizzle<D>::offset(r, m.c)), ok ? cb.addr(c, k, m.c) : c.base, ok ? 16 : 0);  // rows past valid read nothing
  }
}

// The Turing path's prefetch of cache rows into a RegTile.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_cache_regs(RegTile<ROWS, D, NT>& t, const CacheRows& c,
                                                const CacheBlock<ROWS, D, NT>& cb, int valid, int tid) {
  using Map = TileMap<ROWS, D, NT>;
  const Map m(tid);
  if (!m.active()) return;
#pragma unroll
  for (int k = 0; k < Map::N; ++k)
    t.r[k] = m.r0 + k * Map::RS < valid ? __ldg(reinterpret_cast<const uint4*>(cb.addr(c, k, m.c))) : make_uint4(0, 0, 0, 0);
}

// The packed rows' scores outside the window to -inf: lane (g, t) holds packed
// rows row0+g(+8), keys col0+8j+2t(+1) of s[0][j][*]; packed row r is query
// row i = r / group, which sees keys [i+off-left, i+off+right] of [0, len).
template <int NS>
__device__ __forceinline__ void decode_mask(float (&s)[1][NS][4], int row0, int col0, int lane, int group, int len,
                                            int off, int left, int right) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int i = (row0 + g + 8 * hr) / group;
    const int lo = (left < 0 ? 0 : max(0, i + off - left)) - col0;
    const int hi = (right < 0 ? len - 1 : min(len - 1, i + off + right)) - col0;
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int k = 8 * j + 2 * t + e;
        if (k < lo || k > hi) s[0][j][2 * hr + e] = -INFINITY;
      }
  }
}

// Softcap and ALiBi on the raw scores q.k (before decode_mask), in units of
// the cap (ScoreMods): tanh(q.k * cap_in), then minus slope_h/unit *
// |i+off-j|, each packed row with its own head's slope (slope[hr]).
template <int NS>
__device__ __forceinline__ void decode_mods(float (&s)[1][NS][4], int row0, int col0, int lane, int group, int off,
                                            float cap_in, const float (&slope)[2], bool cap, bool alibi) {
  const int g = lane >> 2, t = lane & 3;
  if (cap) {
#pragma unroll
    for (int j = 0; j < NS; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][j][e] = tanh_approx(s[0][j][e] * cap_in);
  }
  if (alibi) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const float dist0 = float((row0 + g + 8 * hr) / group + off - col0 - 2 * t);  // i+off-j of the lane's first key
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          s[0][j][2 * hr + e] = fmaf(-slope[hr], fabsf(dist0 - float(8 * j + e)), s[0][j][2 * hr + e]);
    }
  }
}

// Merging partial results by their LSEs: L = log sum_w exp(lse_w) and the
// weight of part w is exp(lse_w - L). Parts that saw no key have lse -inf
// (weight 0); if none saw one, L = -inf and O = 0.
struct LseMerge {
  float mx = -INFINITY, sum = 0.f;
  __device__ __forceinline__ void max_of(float l) { mx = fmaxf(mx, l); }
  // Online form: a part with lse l > -inf arrives; mx becomes max(mx, l) and
  // the factor returned rescales what was summed relative to the old mx.
  __device__ __forceinline__ float rescale(float l) {
    const float m = fmaxf(mx, l), f = mx == -INFINITY ? 0.f : __expf(mx - m);
    mx = m;
    sum *= f;
    return f;
  }
  __device__ __forceinline__ float weight(float l) const { return mx == -INFINITY ? 0.f : __expf(l - mx); }
  __device__ __forceinline__ void add(float w) { sum += w; }
  __device__ __forceinline__ float lse() const { return sum > 0.f ? mx + __logf(sum) : -INFINITY; }
  __device__ __forceinline__ float inv() const { return sum > 0.f ? 1.f / sum : 0.f; }
};

// Where packed row r of a CTA's (b, kv head) lands: its LSE index (b, h, i)
// and its O row; r must be < Nq*G.
struct PackedRow {
  int64_t lse_idx;
  int64_t o_off;  // element offset of the row in O
  __device__ __forceinline__ PackedRow(const DecodeParams& p, int b, int hk, int r) {
    const int group = p.hq / p.hkv, i = r / group, h = hk * group + r % group;
    lse_idx = (static_cast<int64_t>(b) * p.hq + h) * p.nq + i;
    o_off = b * p.o_batch_stride + i * p.o_row_stride + h * p.o_head_stride;
  }
};

// 8 fp32 values as E into 16 bytes of O.
template <class E>
__device__ __forceinline__ void store8(void* o, const float (&x)[8]) {
  uint4 u;
  u.x = pack2<E>(x[0], x[1]);
  u.y = pack2<E>(x[2], x[3]);
  u.z = pack2<E>(x[4], x[5]);
  u.w = pack2<E>(x[6], x[7]);
  *reinterpret_cast<uint4*>(o) = u;
}

// The splits' merge, done by the last CTAs of each (batch, kv head, row tile)
// group to finish instead of by a second kernel (one launch, no gap between
// two: a combine kernel takes 11-14 us of a 16k-128k call at B 1 on the H200).
// The last M = DecodeParams.merge_ctas CTAs to count
// in share it: each takes a 1/M share of the group's (row, 8 columns) items
// and merges every split's partial rows for them into O and the LSE. A merge
// waits on L2 round trips (the partial rows other SMs wrote: ~1.3 us per
// batch of loads in the H200 probe, whatever the batch's size), so the host
// picks M such that each merging thread loads at most kMergeLoads splits,
// one batch; one CTA walking 132 splits of an MQA group, or a tree of two
// merge levels, waited for several batches in turn.
constexpr int kMergeLoads = 8;  // splits whose partial rows one merging thread loads at once: flashattn's decodeMergeLoads

__device__ __forceinline__ int atomic_add_acq_rel(int* a, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(a), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ int load_acquire(const int* a) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}

// The count-in of a group's n split CTAs on its two counters (cnt[0] counts
// in, cnt[1] the merging CTAs out; zero before the call, zero after it).
// Returns this CTA's merge share, 0..m-1 for the last m to count in (the very
// last takes m-1), or -1. A share other than the last waits for the others
// to count in: it and the CTAs it waits for are the group's last m, each of
// them running or about to be scheduled, so with the host keeping every
// group's m-1 waiting CTAs to a fraction of the device's CTA slots (and the
// rest finishing without waiting) some slot is always free for them.
// One thread counts in, after the barrier, with an acq_rel atomic: its
// release half publishes the whole CTA's writes (the barrier orders them
// before it, and release is cumulative), its acquire half (or the waiting
// CTAs' acquire load of the final count) makes every earlier CTA's writes
// visible (the counter's RMWs chain the releases), and the second barrier
// hands that to the CTA's other threads (CUTLASS's semaphore pattern; each
// thread's own sequentially consistent __threadfence cost more). Readers
// use ld.cg (L2), never a stale L1 line. The share word lives in the merge's
// scratch (smem_raw): a static __shared__ word would push a 32 KiB Turing CTA
// past half of 64 KiB.
__device__ __forceinline__ int decode_count_in(int* cnt, int n, int m) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  int& word = *reinterpret_cast<int*>(smem_raw);
  __syncthreads();  // the CTA's writes precede the count-in (and the shared memory is free)
  if (threadIdx.x == 0) {
    const int old = atomic_add_acq_rel(cnt, 1), share = old - (n - m);
    if (share >= 0 && old < n - 1)
      while (load_acquire(cnt) < n) {
      }
    if (m == 1 && old == n - 1) *cnt = 0;  // no one else reads it this call
    word = share;
  }
  __syncthreads();
  return word;
}

// The count-out of the m merging CTAs (m > 1): the last one out resets both
// counters, after every waiting CTA has seen the full count (their acq_rel
// count-outs order their waits before the reset).
__device__ __forceinline__ void decode_count_out(int* cnt, int m) {
  __syncthreads();  // the CTA's merge is done (its waits are in thread 0's past)
  if (threadIdx.x == 0 && atomic_add_acq_rel(cnt + 1, 1) == m - 1) cnt[0] = 0, cnt[1] = 0;
}

// Merges items [i0, i1) of the group's packed rows [row0, row0+rows) (item
// = row x 8 columns, rows*C of them) over the n splits' partial rows into O
// and the LSE. Threads take items x strided shares of the splits; each loads
// a split's LSE with its partial O and merges online (a running max, as the
// softmax), kMergeLoads splits' loads in flight at once; the shares of an
// item merge by their (max, sum) in shared memory.
template <class T, class E>
__device__ __forceinline__ void decode_merge(const DecodeParams& p, int b, int hk, int row0, int i0, int i1, int n) {
  constexpr int D = T::kD, C = D / 8, NT = T::kThreads;
  static_assert(NT * 10 * 4 <= T::kSmemBytes, "the merge's shared memory");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* sX = reinterpret_cast<float*>(smem_raw);  // [NT][10]: a share's 8 sums, max and exp-sum
  const int tid = threadIdx.x;
  const int64_t all = static_cast<int64_t>(p.b) * p.hq * p.nq;  // LSE rows of one split
  const int items = i1 - i0, parts = max(1, NT / max(items, 1));
  for (int base = 0; base < items; base += NT) {
    __syncthreads();  // sX of the last round (or the share word) is read
    const int idx = base + tid % items, part = tid / items;
    float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    LseMerge mg;  // over the splits: x and mg.sum relative to mg.mx
    const bool mine = idx < items && part < parts;
    const int r = (i0 + idx) / C, c = (i0 + idx) % C;
    const int64_t row = mine ? PackedRow(p, b, hk, row0 + r).lse_idx : 0;
    // kMergeLoads splits at a time: every load of the batch issued before any
    // is used (with the merge inside the loading loop, each split's loads
    // waited for the one before: a round trip per split, 2.8 us for 8 splits
    // in the H200 probe).
    constexpr int U = kMergeLoads;
    for (int k0 = part; mine && k0 < n; k0 += U * parts) {
      float l[U];
      float4 a[U], bb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = k0 + u * parts;
        const int64_t at = static_cast<int64_t>(k < n ? k : 0) * all + row;
        const float4* src = reinterpret_cast<const float4*>(p.o_part + at * D + c * 8);
        l[u] = k < n ? __ldcg(p.lse_part + at) : -INFINITY;
        a[u] = __ldcg(src), bb[u] = __ldcg(src + 1);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (l[u] == -INFINITY) continue;  // past n, or a split without keys (its partial O is 0)
        const float f = mg.rescale(l[u]), wt = mg.weight(l[u]);
        mg.add(wt);
        x[0] = fmaf(wt, a[u].x, x[0] * f), x[1] = fmaf(wt, a[u].y, x[1] * f), x[2] = fmaf(wt, a[u].z, x[2] * f);
        x[3] = fmaf(wt, a[u].w, x[3] * f), x[4] = fmaf(wt, bb[u].x, x[4] * f), x[5] = fmaf(wt, bb[u].y, x[5] * f);
        x[6] = fmaf(wt, bb[u].z, x[6] * f), x[7] = fmaf(wt, bb[u].w, x[7] * f);
      }
    }
    if (parts > 1) {
      float* sx = sX + tid * 10;
#pragma unroll
      for (int e = 0; e < 8; ++e) sx[e] = x[e];
      sx[8] = mg.mx, sx[9] = mg.sum;
      __syncthreads();
      if (tid < items && base + tid < items) {  // part 0 merges the other shares' (max, sum, x)
        for (int q = 1; q < parts; ++q) {
          const float* o = sX + (q * items + tid) * 10;
          if (o[8] == -INFINITY) continue;
          const float f = mg.rescale(o[8]), wt = mg.weight(o[8]);
          mg.sum = fmaf(wt, o[9], mg.sum);
#pragma unroll
          for (int e = 0; e < 8; ++e) x[e] = fmaf(wt, o[e], x[e] * f);
        }
      }
    }
    if (tid < items && base + tid < items) {
      const float inv = mg.inv();
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] *= inv;
      store8<E>(static_cast<E*>(p.o) + PackedRow(p, b, hk, row0 + r).o_off + c * 8, x);
      if (c == 0) p.lse[row] = mg.lse();
    }
  }
}

// The end of a split CTA (its partial rows written): count in on the group's
// counters; in the last merge_ctas, merge this CTA's share of the items.
template <class T, class E>
__device__ __forceinline__ void decode_merge_splits(const DecodeParams& p, int b, int hk, int row0, int rows) {
  const int splits = gridDim.x, items = rows * (T::kD / 8), m = max(1, min(p.merge_ctas, min(splits, items)));
  int* cnt = p.split_count + 2 * static_cast<int64_t>(blockIdx.y * gridDim.z + blockIdx.z);
  const int share = decode_count_in(cnt, splits, m);
  if (share < 0) return;
  decode_merge<T, E>(p, b, hk, row0, share * items / m, (share + 1) * items / m, splits);
  if (m > 1) decode_count_out(cnt, m);
}

// The Turing D256 row's warp math (DecodeTile kRows 8) is n8.cuh's
// transposed form; its tile's 8 packed rows of Q go into sQ (swizzled; rows
// past Nq*G are 0; read after the first barrier of the block loop), and the
// rows' slopes with the rest of its state into n8.
template <class T, class N8>
__device__ __forceinline__ void decode_load_q_n8(N8& n8, const DecodeParams& p, __half* sQ, int b, int hk, int row0, int rows,
                                                 int group, bool alibi, float unit, int tid) {
  constexpr int D = T::kD, C = D / 8, R = T::kRows, NT = T::kThreads;
  for (int idx = tid; idx < R * C; idx += NT) {
    const int r = idx / C, c = idx % C, pr = row0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (pr < rows)
      v = *reinterpret_cast<const uint4*>(static_cast<const __half*>(p.q) + b * p.q_batch_stride +
                                          (pr / group) * p.q_row_stride + (hk * group + pr % group) * p.q_head_stride + c * 8);
    *reinterpret_cast<uint4*>(sQ + Swizzle<D>::offset(r, c)) = v;
  }
  const int t = (tid & 31) & 3;
  float slope[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = row0 + 2 * t + e;
    slope[e] = alibi && r < rows ? p.alibi_slopes[hk * group + r % group] / unit : 0.f;
  }
  n8.init(slope[0], slope[1]);
}

template <class T, class E = __half>
__device__ __forceinline__ void decode_kernel(const DecodeParams& p) {
  static_assert(std::is_same<E, __half>::value || T::kArch == 80, "bf16 runs on the sm_80 path only");
  constexpr int A = T::kArch, D = T::kD, Bc = T::kBc, NT = T::kThreads, W = T::kWarps;
  constexpr int Bw = T::kBw;  // keys per warp per block
  constexpr int KD = D / 16, NS = Bw / 8, KB = Bw / 16, NO = D / 8, C = D / 8;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv;
  const int group = p.hq / p.hkv, rows = p.nq * group;
  constexpr int R = T::kRows;  // packed rows per CTA: one m16 tile, or one n8 tile (n8.cuh)
  constexpr bool kN8 = R == 8;
  static_assert(R == 16 || kN8, "the packed rows are one m16 or one n8 tile");
  const int row0 = blockIdx.z * R;  // the tile's first packed row
  const int len = p.uniform_len >= 0 ? p.uniform_len : p.seqlens[b], off = len - p.nq, live_rows = min(R, rows - row0);
  // The key blocks the tile's query rows see, [wb.n_begin, wb.n_end) (the
  // whole sequence without a window), and this split's equal share of them
  // (empty when there are fewer blocks than splits: then O = 0, LSE = -inf);
  // blocks outside [wb.n_full, wb.n_mask) need the element mask.
  const WindowBlocks wb = window_blocks_rows<Bc>(row0 / group, (row0 + live_rows - 1) / group, p.nq, len,
                                                 p.window_left, p.window_right);
  const int nblk = wb.n_end - wb.n_begin, split = blockIdx.x, splits = gridDim.x;
  // 32-bit: nblk * splits < 2^32 (<= 256 splits, nblk < 2^24 blocks).
  const int n_begin = wb.n_begin + static_cast<int>(static_cast<unsigned>(nblk) * split / splits);
  const int n_end = wb.n_begin + static_cast<int>(static_cast<unsigned>(nblk) * (split + 1) / splits);
  // Softcap and ALiBi (ScoreMods' units): the softmax runs in units of the cap.
  const bool cap = p.softcap > 0.f, alibi = p.alibi_slopes != nullptr;
  const float unit = cap ? p.softcap : p.scale, unit_log2 = cap ? p.softcap * kLog2e : p.scale_log2;
  const float cap_in = cap ? p.scale / p.softcap : 0.f;
  // Q's fragments and the ALiBi slopes are loaded after the first blocks'
  // copies are issued (load_q): the index math before those copies is what a
  // short call waits on (H200: 1k-4k caches 4-11% faster).
  // Q straight from global (rows past Nq*G are 0): lane (g, t) holds packed
  // rows g, g+8, columns 16kk + 2t (+8) of each k16 step.
  uint32_t qf[1][KD][4];
  float slope[2];  // ALiBi slope / unit of the lane's packed rows g, g+8
  struct None {};
  std::conditional_t<kN8, WarpN8<A, D, Bw, E>, None> n8;  // kN8: the warp math of an n8 tile (the rest is the same)
  auto load_q = [&] {
    if constexpr (kN8) {
      decode_load_q_n8<T>(n8, p, smem + 2 * T::kStages * Bc * D, b, hk, row0, rows, group, alibi, unit, tid);
    } else {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = row0 + g + 8 * hh;
        const bool live = r < rows;
        const int i = live ? r / group : 0, h = hk * group + (live ? r % group : 0);
        const uint32_t* q = reinterpret_cast<const uint32_t*>(static_cast<const __half*>(p.q) + b * p.q_batch_stride +
                                                              i * p.q_row_stride + h * p.q_head_stride) + t;
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
          qf[0][kk][hh] = live ? q[8 * kk] : 0u;
          qf[0][kk][2 + hh] = live ? q[8 * kk + 4] : 0u;
        }
        slope[hh] = alibi && live ? p.alibi_slopes[h] / unit : 0.f;
      }
    }
  };

  if constexpr (A == 75) load_q();  // Turing: first (later, its D128 kernel spilled 4 B as sm_80-89 SASS)
  const int32_t* table = p.block_table ? p.block_table + static_cast<int64_t>(b) * p.table_stride : nullptr;
  const int64_t kb = table ? 0 : b * p.k_batch_stride, vb = table ? 0 : b * p.v_batch_stride;
  const CacheRows ck{static_cast<const __half*>(p.k) + kb + hk * p.k_head_stride, p.k_batch_stride, p.k_row_stride, table,
                     p.page_size};
  const CacheRows cv{static_cast<const __half*>(p.v) + vb + hk * p.v_head_stride, p.v_batch_stride, p.v_row_stride, table,
                     p.page_size};

  __half* sK = smem;
  __half* sV = smem + T::kStages * Bc * D;
  const LdAddr<D, kRowsFirst> la(lane);   // V
  const LdAddr<D, kChunksFirst> lk(lane);  // K
  const uint32_t aK = smem_u32(sK), aV = smem_u32(sV);

  float o[1][NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[0][n][e] = 0.f;
  OnlineSoftmax<1> sm;
  sm.init();

  // One block of keys from the buffers at kbase/vbase: this warp's Bw keys.
  auto step = [&](int n, uint32_t kbase, uint32_t vbase) {
    if constexpr (kN8) {
      n8.step(smem_u32(smem + 2 * T::kStages * Bc * D), kbase, vbase, warp * Bw, n * Bc + warp * Bw,
              n < wb.n_full || n >= wb.n_mask, lane, row0, group, len, off, p.window_left, p.window_right, cap, alibi,
              cap_in, unit_log2);
      return;
    }
    float s[1][NS][4];
    gemm_abt<A, D, 1, Bw, true, E>(s, qf, la, 0, 0, lk, kbase, warp * Bw);  // S = Q K^T
    const int col0 = n * Bc + warp * Bw;
    if (cap || alibi) decode_mods<NS>(s, row0, col0, lane, group, off, cap_in, slope, cap, alibi);
    if (n < wb.n_full || n >= wb.n_mask)
      decode_mask<NS>(s, row0, col0, lane, group, len, off, p.window_left, p.window_right);
    sm.step(s, o, unit_log2);
    uint32_t pf[1][KB][4];
    pack_a<1, Bw, E>(s, pf);
    gemm_pb<A, D, 1, Bw, E>(o, pf, la, vbase, warp * Bw);  // O += P V
  };

  if constexpr (A == 80) {
    // Stages-deep cp.async ring: block n lives in buffer (n - n_begin) % Stages;
    // Stages-1 blocks are in flight while one is consumed.
    constexpr int S = T::kStages;
    CacheBlock<Bc, D, NT> cb{};  // where the next block to issue lies
    auto issue = [&](int n, int buf) {
      if (n < n_end) {
        cp_cache_tile<Bc, D, NT>(sK + buf * Bc * D, ck, cb, len - n * Bc, tid);
        cp_cache_tile<Bc, D, NT>(sV + buf * Bc * D, cv, cb, len - n * Bc, tid);
        if (n + 1 < n_end) cb.load(ck, (n + 1) * Bc, len - (n + 1) * Bc, tid);
      }
      cp_async_commit();  // empty groups keep the wait count below uniform
    };
    if (n_begin < n_end) cb.load(ck, n_begin * Bc, len - n_begin * Bc, tid);
#pragma unroll
    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);
    load_q();
    int buf = 0;
    for (int n = n_begin; n < n_end; ++n) {
      cp_async_wait<S - 2>();
      __syncthreads();  // block n landed; every warp is done with block n-1's buffer
      issue(n + S - 1, buf == 0 ? S - 1 : buf - 1);
      step(n, aK + buf * Bc * D * 2, aV + buf * Bc * D * 2);
      buf = buf == S - 1 ? 0 : buf + 1;
    }
    cp_async_wait<0>();
  } else {
    RegTile<Bc, D, NT> rk, rv;
    CacheBlock<Bc, D, NT> cb{};  // where the next block to load lies
    if (n_begin < n_end) {
      cb.load(ck, n_begin * Bc, len - n_begin * Bc, tid);
      load_cache_regs<Bc, D, NT>(rk, ck, cb, len - n_begin * Bc, tid);
      load_cache_regs<Bc, D, NT>(rv, cv, cb, len - n_begin * Bc, tid);
      if (n_begin + 1 < n_end) cb.load(ck, (n_begin + 1) * Bc, len - (n_begin + 1) * Bc, tid);
      rk.store(sK, tid);
      rv.store(sV, tid);
      __syncthreads();
    }
    // The next block's loads are in flight during the whole step (K's alone
    // where T::kPrefetchV is false: V's are loaded after it).
    constexpr bool PV = T::kPrefetchV;
    for (int n = n_begin; n < n_end; ++n) {
      const bool more = n + 1 < n_end;
      if (more) {
        load_cache_regs<Bc, D, NT>(rk, ck, cb, len - (n + 1) * Bc, tid);
        if constexpr (PV) {
          load_cache_regs<Bc, D, NT>(rv, cv, cb, len - (n + 1) * Bc, tid);
          if (n + 2 < n_end) cb.load(ck, (n + 2) * Bc, len - (n + 2) * Bc, tid);
        }
      }
      step(n, aK, aV);
      if (more) {
        if constexpr (!PV) {
          load_cache_regs<Bc, D, NT>(rv, cv, cb, len - (n + 1) * Bc, tid);
          if (n + 2 < n_end) cb.load(ck, (n + 2) * Bc, len - (n + 2) * Bc, tid);
        }
        __syncthreads();  // every warp is done with block n
        rk.store(sK, tid);
        rv.store(sV, tid);
        __syncthreads();
      }
    }
  }

  // Each warp's O (normalised) and LSE into shared memory, then merged by LSE,
  // kMergePasses column ranges one after another (traits.cuh).
  float lse[1][2];
  if constexpr (kN8) n8.finish(unit);
  else sm.finish(o, unit, lse);
  constexpr int LD = T::kMergeLD, PC = C / T::kMergePasses;  // 8-column groups per pass
  float* sO = reinterpret_cast<float*>(smem_raw);  // [W][R][LD]
  float* sL = sO + W * R * LD;                     // [W][R]
#pragma unroll
  for (int pass = 0; pass < T::kMergePasses; ++pass) {
    __syncthreads();  // every warp is done with the K/V buffers (or the last pass)
    if constexpr (kN8) {
      n8.template stage<LD, PC>(sO + warp * R * LD, sL + warp * R, pass, lane);
    } else {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = g + 8 * hh;
#pragma unroll
        for (int n = pass * PC; n < (pass + 1) * PC; ++n)
          *reinterpret_cast<float2*>(sO + (warp * R + row) * LD + 8 * (n - pass * PC) + 2 * t) =
              make_float2(o[0][n][2 * hh], o[0][n][2 * hh + 1]);
        if (pass == 0 && t == 0) sL[warp * R + row] = lse[0][hh];
      }
    }
    __syncthreads();
    for (int idx = tid; idx < live_rows * PC; idx += NT) {
      const int row = idx / PC, c = pass * PC + idx % PC;
      LseMerge mg;
#pragma unroll
      for (int w = 0; w < W; ++w) mg.max_of(sL[w * R + row]);
      float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const float wt = mg.weight(sL[w * R + row]);
        mg.add(wt);
        const float4* src = reinterpret_cast<const float4*>(sO + (w * R + row) * LD + (c - pass * PC) * 8);
        const float4 a = src[0], bb = src[1];
        x[0] += wt * a.x, x[1] += wt * a.y, x[2] += wt * a.z, x[3] += wt * a.w;
        x[4] += wt * bb.x, x[5] += wt * bb.y, x[6] += wt * bb.z, x[7] += wt * bb.w;
      }
      const float inv = mg.inv();
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] *= inv;
      const PackedRow pr(p, b, hk, row0 + row);
      if (splits == 1) {
        store8<E>(static_cast<E*>(p.o) + pr.o_off + c * 8, x);
        if (c == 0) p.lse[pr.lse_idx] = mg.lse();
      } else {  // partial results: (splits, B*Hq*Nq, D) and (splits, B*Hq*Nq)
        const int64_t part = static_cast<int64_t>(split) * p.b * p.hq * p.nq + pr.lse_idx;
        float4* dst = reinterpret_cast<float4*>(p.o_part + part * D + c * 8);
        dst[0] = make_float4(x[0], x[1], x[2], x[3]);
        dst[1] = make_float4(x[4], x[5], x[6], x[7]);
        if (c == 0) p.lse_part[part] = mg.lse();
      }
    }
  }
  if (splits > 1) decode_merge_splits<T, E>(p, b, hk, row0, live_rows);
}

}  // namespace fa2
