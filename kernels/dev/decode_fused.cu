// decode_fused.cu: a dev experiment for issue 14, D128 on the sm_80 path: the
// split merge done by the last CTA of each (batch, kv head, row tile) instead
// of a second kernel (decode_combine_kernel), as FA2's split-KV "last block"
// reduction. The shipped decode_kernel runs unchanged and writes its partial
// O and LSE; then each CTA fences, counts itself in, and the CTA that counts
// last merges the splits of its packed rows and resets the counter (so the
// workspace needs zeroing once, not per call). For decode_sidebyside.py
// --profile, beside the shipped two kernels.
//
// Build here with nvcc 11.8, as the fatbin (the H200 runs the sm_90 SASS):
//   nvcc -O3 -std=c++17 -cubin -arch=sm_90 -Xptxas -v kernels/dev/decode_fused.cu -o decode_fused.cubin
#include "../decode.cuh"

// The shipped DecodeParams and one counter per (blockIdx.y, blockIdx.z), zeroed once.
struct FusedParams {
  DecodeParams p;
  int* counters;
};

template <class T>
__device__ __forceinline__ void decode_fused(const FusedParams& fp) {
  const DecodeParams& p = fp.p;
  fa2::decode_kernel<T, __half>(p);
  if (gridDim.x == 1) return;  // one split: the kernel wrote O and the LSE
  constexpr int D = T::kD, C = D / 8, R = T::kRows, NT = T::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int last;
  float* sL = reinterpret_cast<float*>(smem_raw);  // [splits][R]: the splits' LSEs, then per row max and 1/sum
  __threadfence();  // this CTA's partial rows are visible before it counts in
  __syncthreads();  // (also: every warp is done with the merge's shared memory)
  int* cnt = fp.counters + blockIdx.y * gridDim.z + blockIdx.z;
  if (threadIdx.x == 0) {
    last = atomicAdd(cnt, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) *cnt = 0;  // ready for the next call (stream-ordered)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv, row0 = blockIdx.z * R;
  const int rows = min(R, p.nq * (p.hq / p.hkv) - row0), splits = gridDim.x;
  const int64_t all = static_cast<int64_t>(p.b) * p.hq * p.nq;  // LSE rows of one split
  float* sMax = sL + splits * R;
  float* sInv = sMax + R;
  // Every split's LSE of each row in flight at once.
  for (int i = threadIdx.x; i < splits * R; i += NT) {
    const int s = i / R, r = i % R;
    sL[i] = r < rows ? __ldcg(p.lse_part + s * all + fa2::PackedRow(p, b, hk, row0 + r).lse_idx) : -INFINITY;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    const int r = threadIdx.x;
    fa2::LseMerge mg;
    for (int s = 0; s < splits; ++s) mg.max_of(sL[s * R + r]);
    for (int s = 0; s < splits; ++s) mg.add(mg.weight(sL[s * R + r]));
    sMax[r] = mg.mx;
    sInv[r] = mg.inv();
    p.lse[fa2::PackedRow(p, b, hk, row0 + r).lse_idx] = mg.lse();
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * C; idx += NT) {
    const int r = idx / C, c = idx % C;
    const fa2::PackedRow pr(p, b, hk, row0 + r);
    const float mx = sMax[r];
    float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 8
    for (int s = 0; s < splits; ++s) {  // independent loads: 8 in flight
      const float l = sL[s * R + r];
      const float wt = mx == -INFINITY ? 0.f : __expf(l - mx);
      const float4* src = reinterpret_cast<const float4*>(p.o_part + (s * all + pr.lse_idx) * D + c * 8);
      const float4 a = __ldcg(src), bb = __ldcg(src + 1);
      if (wt != 0.f) {  // a split without keys: its partial O is 0
        x[0] += wt * a.x, x[1] += wt * a.y, x[2] += wt * a.z, x[3] += wt * a.w;
        x[4] += wt * bb.x, x[5] += wt * bb.y, x[6] += wt * bb.z, x[7] += wt * bb.w;
      }
    }
    const float inv = sInv[r];
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] *= inv;
    fa2::store8<__half>(static_cast<__half*>(p.o) + pr.o_off + c * 8, x);
  }
}

// The same one-launch decode with the merge parallelised (issue 14, session 6).
// MergeRows: the last CTA's packed rows, their LSE indices and O offsets, and
// the splits' weights, computed once per (split, row) and normalised into
// shared memory (a warp per row, its lanes over the splits, shuffle
// reductions); it also writes the rows' LSEs.
template <class T>
struct MergeRows {
  static constexpr int R = T::kRows, W = T::kWarps, NT = T::kThreads;
  static constexpr int kMaxSplits = 128;  // flashattn/gpu_decode.go decodeSplits' cap
  static constexpr int kWeightBytes = kMaxSplits * R * 4;
  int64_t idx[R], off[R];  // (shared) each row's LSE index and O offset
  // After the CTA knows it is the last; w: [split][R] floats of its dynamic
  // shared memory (the LSEs, then the weights). Ends with a __syncthreads.
  __device__ __forceinline__ void weights(float* w, const DecodeParams& p, int b, int hk, int row0, int rows, int splits, int64_t all) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x < rows) {
      const fa2::PackedRow pr(p, b, hk, row0 + threadIdx.x);
      idx[threadIdx.x] = pr.lse_idx;
      off[threadIdx.x] = pr.o_off;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < splits * rows; i += NT) {
      const int s = i / rows, r = i % rows;
      w[s * R + r] = __ldcg(p.lse_part + s * all + idx[r]);
    }
    __syncthreads();
    for (int r = warp; r < rows; r += W) {
      float mx = -INFINITY, sum = 0.f;
      for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, w[s * R + r]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      for (int s = lane; s < splits; s += 32) sum += mx == -INFINITY ? 0.f : __expf(w[s * R + r] - mx);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      for (int s = lane; s < splits; s += 32) w[s * R + r] = mx == -INFINITY ? 0.f : __expf(w[s * R + r] - mx) * inv;
      if (lane == 0) p.lse[idx[r]] = sum > 0.f ? mx + __logf(sum) : -INFINITY;
    }
    __syncthreads();
  }
};

// Whether this CTA is the last of its (batch, kv head, row tile) to finish;
// the last one resets the counter (stream-ordered: ready for the next call).
__device__ __forceinline__ bool count_in(const FusedParams& fp, int& last) {
  __threadfence();  // this CTA's partial rows are visible before it counts in
  __syncthreads();  // (also: every warp is done with the shared memory)
  int* cnt = fp.counters + blockIdx.y * gridDim.z + blockIdx.z;
  if (threadIdx.x == 0) {
    last = atomicAdd(cnt, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) *cnt = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// fused2: every thread of the last CTA owns one (row, 4 columns) of O and sums
// the splits' partial rows from L2 with the weights: 128 threads busy at 4
// rows of D 128 (the fused kernel above: 64 threads, 8 columns each, each
// weight recomputed).
template <class T>
__device__ __forceinline__ void decode_fused2(const FusedParams& fp) {
  const DecodeParams& p = fp.p;
  fa2::decode_kernel<T, __half>(p);
  if (gridDim.x == 1) return;  // one split: the kernel wrote O and the LSE
  constexpr int D = T::kD, C4 = D / 4, R = T::kRows, NT = T::kThreads;
  __shared__ int last;
  __shared__ MergeRows<T> mr;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  if (!count_in(fp, last)) return;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv, row0 = blockIdx.z * R;
  const int rows = min(R, p.nq * (p.hq / p.hkv) - row0), splits = gridDim.x;
  const int64_t all = static_cast<int64_t>(p.b) * p.hq * p.nq;  // LSE rows of one split
  float* w = reinterpret_cast<float*>(smem_raw);
  mr.weights(w, p, b, hk, row0, rows, splits, all);
  for (int idx = threadIdx.x; idx < rows * C4; idx += NT) {
    const int r = idx / C4, c = idx % C4;
    const float* src = p.o_part + mr.idx[r] * D + c * 4;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < splits; ++s) {  // independent loads: 8 in flight
      const float wt = w[s * R + r];
      const float4 a = __ldcg(reinterpret_cast<const float4*>(src + s * all * D));
      if (wt != 0.f) x.x += wt * a.x, x.y += wt * a.y, x.z += wt * a.z, x.w += wt * a.w;  // 0: a split without keys
    }
    *reinterpret_cast<uint2*>(static_cast<__half*>(p.o) + mr.off[r] + c * 4) =
        make_uint2(fa2::pack2<__half>(x.x, x.y), fa2::pack2<__half>(x.z, x.w));
  }
}

// fused3: as fused2, but the last CTA first issues cp.async copies of the
// splits' partial rows into its (now idle) K/V shared memory, as many splits
// per round as fit, and computes the weights while they land: the partial O
// crosses L2 in one round trip per round instead of one per 8 splits.
template <class T>
__device__ __forceinline__ void decode_fused3(const FusedParams& fp) {
  const DecodeParams& p = fp.p;
  fa2::decode_kernel<T, __half>(p);
  if (gridDim.x == 1) return;  // one split: the kernel wrote O and the LSE
  constexpr int D = T::kD, C4 = D / 4, R = T::kRows, NT = T::kThreads;
  constexpr int kItems = (R * C4 + NT - 1) / NT;  // (row, 4 columns) items per thread at most
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int last;
  __shared__ MergeRows<T> mr;
  if (!count_in(fp, last)) return;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv, row0 = blockIdx.z * R;
  const int rows = min(R, p.nq * (p.hq / p.hkv) - row0), splits = gridDim.x;
  const int64_t all = static_cast<int64_t>(p.b) * p.hq * p.nq;  // LSE rows of one split
  static_assert(T::kSmemBytes >= MergeRows<T>::kWeightBytes + R * D * 4, "the weights and one split's rows fit");
  float* w = reinterpret_cast<float*>(smem_raw + T::kSmemBytes - MergeRows<T>::kWeightBytes);  // the weights last
  float* sP = reinterpret_cast<float*>(smem_raw);  // [round's split][row][D] before them
  const int per = (T::kSmemBytes - MergeRows<T>::kWeightBytes) / (rows * D * 4);  // splits per round
  float4 x[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) x[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < splits; s0 += per) {
    const int n = min(per, splits - s0);
    for (int i = threadIdx.x; i < n * rows * C4; i += NT) {
      const int s = i / (rows * C4), r = i / C4 % rows, c = i % C4;
      const fa2::PackedRow pr(p, b, hk, row0 + r);
      fa2::cp_async_16(fa2::smem_u32(sP + (s * rows + r) * D + c * 4), p.o_part + ((s0 + s) * all + pr.lse_idx) * D + c * 4, 16);
    }
    fa2::cp_async_commit();
    if (s0 == 0) mr.weights(w, p, b, hk, row0, rows, splits, all);  // while the first round lands
    fa2::cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int idx = threadIdx.x + k * NT, r = idx / C4, c = idx % C4;
      if (idx < rows * C4)
#pragma unroll 4
        for (int s = 0; s < n; ++s) {
          const float wt = w[(s0 + s) * R + r];
          const float4 a = *reinterpret_cast<const float4*>(sP + (s * rows + r) * D + c * 4);
          if (wt != 0.f) x[k].x += wt * a.x, x[k].y += wt * a.y, x[k].z += wt * a.z, x[k].w += wt * a.w;
        }
    }
    __syncthreads();  // every thread is done with this round's rows
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int idx = threadIdx.x + k * NT, r = idx / C4, c = idx % C4;
    if (idx < rows * C4)
      *reinterpret_cast<uint2*>(static_cast<__half*>(p.o) + mr.off[r] + c * 4) =
          make_uint2(fa2::pack2<__half>(x[k].x, x[k].y), fa2::pack2<__half>(x[k].z, x[k].w));
  }
}

using ShippedD128 = DecodeTraits<80, 128>::type;
extern "C" __global__ void __launch_bounds__(ShippedD128::kThreads) dev_decode_fused_d128(const FusedParams fp) {
  fa2::arch_entry<80, FusedParams, decode_fused<ShippedD128>>(fp);
}

extern "C" __global__ void __launch_bounds__(ShippedD128::kThreads) dev_decode_fused2_d128(const FusedParams fp) {
  fa2::arch_entry<80, FusedParams, decode_fused2<ShippedD128>>(fp);
}

extern "C" __global__ void __launch_bounds__(ShippedD128::kThreads) dev_decode_fused3_d128(const FusedParams fp) {
  fa2::arch_entry<80, FusedParams, decode_fused3<ShippedD128>>(fp);
}

// An empty kernel: the launch-latency floor, launched alone and twice back to back.
extern "C" __global__ void dev_empty() {}
