// bwd_sm90.cuh: the Hopper backward (sm_90a): FA3's structure, warp
// specialisation with TMA loads and wgmma, on the tile of traits.cuh's
// Tile90Bwd. Three kernels, the sm_80 single pass's launch contract:
//   bwd_pre: per query block of Br rows and (b, h): Di = rowsum(dO * O) and
//     LSE log2(e) into the scratch after the dQ accumulator (padded to the
//     accumulator's rows: LSE +inf where P must be 0, a row past Nq or seeing
//     no key; Di 0), the block's accumulator rows and turn counter zeroed.
//   bwd_kernel: one CTA per key block of Bc keys and (b, kv head).
//     producer warpgroup: gives its registers away (setmaxnreg); one thread
//       loads K and V once, then per query block m of every query head of the
//       kv head Q_m and dO_m (TMA, 128-byte swizzled) and the block's LSE and
//       Di (1D bulk copies) into kStages stages, each with a "full" mbarrier
//       (expect_tx) and an "empty" one (every consumer thread arrives).
//     consumers: 64 keys each (wgmma's M), dK and dV in registers over every
//       block. Per block: S^T = K Q_m^T, then dP^T = V dO_m^T issued while P^T
//       = exp2(S^T scale log2(e) - LSE log2(e)) is computed; dS^T = P^T (dP^T -
//       Di); dV += P^T dO_m and dK += dS^T Q_m with P^T and dS^T as register A
//       operands (the accumulator layout is mma.sync's C layout, as the
//       forward's P); dS^T also to shared memory, the A operand (read M-major)
//       of dQ_m = dS K. kEarlyDV (D128): dV's GEMM is issued once P^T is
//       packed, so dS^T is computed and stored under it; with kDSBufs 2 the
//       dS^T of consecutive blocks alternate between two buffers. Otherwise
//       (D64) dV's and dQ_m's GEMMs go first. dK's runs under dQ_m's
//       epilogue (kLateDK; not in D64's ordered twin without causality,
//       which would spill). The mask runs only on the
//       blocks that need it (the last key block, the causal diagonal's). The
//       register arrays are pinned (fence_regs) so that ptxas issues each
//       batch of wgmmas back to back.
//     dQ_m: each consumer's partial (Tile90Bwd's split: by columns, 64
//       columns over all Bc keys; by rows, 64 queries over all Bc keys; by
//       keys, its own 64 keys) goes to shared memory in fragment order
//       (dq_frag: conflict-free float2 stores) and is added to the fp32
//       accumulator, laid out in the same order, by one TMA bulk reduce-add.
//       kDQSwap (Br 80, no wgmma M): the columns' partial is computed
//       transposed, dQ_m^T = K^T dS^T, from dS^T stored in 8x8 core matrices
//       (ds_off), and bwd_dqconv transposes it back.
//     kDet (the _ordered kernels, Options.Deterministic): the key blocks add
//       their partials in a fixed order, a turn counter per query block in
//       global memory (acquire/release); a thread of the producer warpgroup
//       (the dQ writer, as FA3's) waits for the turn and issues the adds,
//       the consumers hand it their buffers by mbarriers. Non-causal: each
//       key block starts at its own query block and wraps around, the turns
//       in that arrival order (Sm90BwdArgs::det_spread; else they ascend with
//       the key block from query block 0); causal: they descend from the
//       query block's last key block and the CTAs take the key blocks last
//       to first, so a turn only waits on CTAs dispatched before.
//   bwd_dqconv: dQ = accumulator * scale, rounded to E, from fragment order.
// Causal is bottom-right aligned: row i sees keys j <= i + Nk - Nq.
// E is the element type of every 16-bit operand: __half or __nv_bfloat16.
// Not here (the host runs those calls on the sm_80 path): varlen, a window,
// softcap or ALiBi, head dims other than FA2_SM90A_BWD_TILES'.
// Measured on the H200 and H100, and what was tried: docs/kernels.md.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "mma.cuh"
#include "params.cuh"
#include "tma.cuh"
#include "traits.cuh"
#include "wgmma.cuh"

namespace sm90 {

// The pre kernel's scratch after the dQ accumulator (Sm90BwdArgs): per (b,
// h) of rows = dq_accum_rows, LSE log2(e), Di and a turn per query block.
struct BwdScratch {
  float* acc;
  float* lse2;
  float* di;
  int* turns;
};
__device__ __forceinline__ BwdScratch bwd_scratch(const BwdParams& p) {
  const int64_t bhr = static_cast<int64_t>(p.b) * p.hq * p.dq_accum_rows;
  BwdScratch s;
  s.acc = p.dq_accum;
  s.lse2 = s.acc + bhr * p.d;
  s.di = s.lse2 + bhr;
  s.turns = reinterpret_cast<int*>(s.di + bhr);
  return s;
}

// Element (r, x) of a consumer's 64-row dQ_m partial of `cols` columns in
// fragment order: each warp's 32 lanes store 64 consecutive floats per
// (column block of 8, row half), so the float2 stores hit every bank once.
__host__ __device__ inline int dq_frag(int r, int x, int cols) {
  const int w = r / 16, hh = (r % 16) / 8, g8 = r % 8, i = x / 8, c2 = x % 8 & ~1, e = x & 1;
  return ((w * (cols / 8) + i) * 2 + hh) * 64 + (4 * g8 + c2 / 2) * 2 + e;
}
// Element (r, x) of a Br-row block of the accumulator: consumer c's partial
// at c * 64 * 64 (by columns: its 64 columns; by rows: its 64 rows).
// With kDQSwap the partial is dQ_m^T's (64 columns x Br queries) at c * 64 * Br.
template <class T>
__host__ __device__ inline int dq_acc_index(int r, int x) {
  if (T::kDQSwap) return x / 64 * 64 * T::kBr + dq_frag(x % 64, r, T::kBr);
  if (T::kDQByCols) return x / 64 * 64 * 64 + dq_frag(r, x % 64, 64);
  if (T::kDQByRows) return r / 64 * 64 * T::kD + dq_frag(r % 64, x, T::kD);
  return dq_frag(r, x, T::kD);
}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_reduce_add(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Until *p == want, then acquire (GPU scope) and order the async proxy (the
// bulk reduce-add that follows) after it. The spin reads relaxed: an acquire
// load per spin invalidates the SM's L1. A turn that never comes (a bug)
// traps after 2^28 spins of at least 64 ns: a kernel fault, not a hang.
__device__ __forceinline__ void wait_turn(const int* p, int want) {
  for (unsigned spins = 0;; ++spins) {
    int v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    if (v == want) break;
    __nanosleep(64);
    if (spins == 1u << 28) __trap();
  }
  asm volatile("fence.acq_rel.gpu;\nfence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Byte offset of dS^T's element (key r, query x) in a consumer's buffer: with
// kDQSwap in 8x8 core matrices (the 8-key groups Br * 16 bytes apart, the
// 8-query groups 128 bytes), the B operand of dQ_m^T; else swizzled in
// boxes of 64 queries, the A operand (M-major) of dQ_m. Both take a warp's
// 32-bit stores of a row pair conflict-free.
template <class T>
__device__ __forceinline__ int ds_off(int r, int x) {
  if constexpr (T::kDQSwap) return (r / 8) * T::kBr * 16 + (x / 8) * 128 + (r % 8) * 16 + (x % 8) * 2;
  else return swz<64>(r, x);
}

// Both consumer warpgroups (256 threads): named barrier 5, after
// consumer_sync's ids 3 and 4.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 5, 256;\n" ::: "memory"); }

// P = exp2(x): ex2.approx.ftz where the tile asks for it (Tile90Bwd::kExp2Approx).
template <class T>
__device__ __forceinline__ float p_exp2(float x) {
  if constexpr (T::kExp2Approx) return fa2::exp2_approx(x);
  else return exp2f(x);
}

// bwd_pre: grid (rows / Br, B*Hq), 256 threads: warp w takes rows
// Br/8 w.. of the block, a row per D/8 lanes that read 16 bytes each of O and
// dO; every load of the warp is issued before the first sum, so its rows'
// reads are in flight together.
template <class T, class E>
__device__ void bwd_pre(const Sm90BwdArgs& a) {
  constexpr int D = T::kD, L = D / 8, kRowsPerStep = 32 / L, kSteps = T::kBr / 8 / kRowsPerStep;
  using E2 = typename fa2::Pair<E>::type;
  const BwdParams& p = a.p;
  const BwdScratch s = bwd_scratch(p);
  const int m = blockIdx.x, bh = blockIdx.y, b = bh / p.hq, h = bh % p.hq, t = threadIdx.x, w = t / 32, lane = t % 32;
  const int64_t row0 = static_cast<int64_t>(bh) * p.dq_accum_rows + m * T::kBr;
  const E* gO = static_cast<const E*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride + lane % L * 8;
  const E* gdO = static_cast<const E*>(p.dout) + b * p.do_batch_stride + h * p.do_head_stride + lane % L * 8;
  const int r0 = m * T::kBr + w * (T::kBr / 8) + lane / L;  // this lane's row at step 0
  uint4 o[kSteps], d[kSteps];
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int r = r0 + j * kRowsPerStep;
    o[j] = d[j] = make_uint4(0u, 0u, 0u, 0u);
    if (r < p.nq) {
      o[j] = __ldg(reinterpret_cast<const uint4*>(gO + r * p.o_row_stride));
      d[j] = __ldg(reinterpret_cast<const uint4*>(gdO + r * p.do_row_stride));
    }
  }
  if (t < T::kBr) {  // LSE in log2 units; +inf for rows past Nq or seeing no key (P = 0)
    const int r = m * T::kBr + t;
    const float lse = r < p.nq ? __ldg(p.lse + static_cast<int64_t>(bh) * p.nq + r) : -INFINITY;
    s.lse2[row0 + t] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
  }
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const E2* oh = reinterpret_cast<const E2*>(&o[j]);
    const E2* dh = reinterpret_cast<const E2*>(&d[j]);
    float di = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 of = fa2::to_float2(oh[e]), df = fa2::to_float2(dh[e]);
      di = fmaf(of.x, df.x, fmaf(of.y, df.y, di));
    }
#pragma unroll
    for (int off = L / 2; off > 0; off /= 2) di += __shfl_xor_sync(0xffffffffu, di, off);
    if (lane % L == 0) s.di[row0 + r0 + j * kRowsPerStep - m * T::kBr] = di;  // 0 past Nq
  }
  float4* acc = reinterpret_cast<float4*>(s.acc + row0 * D);
  for (int i = t; i < T::kBr * D / 4; i += blockDim.x) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (t == 0) s.turns[row0 / T::kBr] = 0;
}

// bwd_dqconv: grid (rows / Br, B*Hq), 256 threads: dQ of the block's rows
// below Nq, two columns per thread and step; every step's load (the
// accumulator is padded to whole blocks) is issued before the first store.
template <class T, class E>
__device__ void bwd_dqconv(const Sm90BwdArgs& a) {
  constexpr int D = T::kD, kSteps = T::kBr * D / 2 / 256;
  static_assert(T::kBr * D / 2 % 256 == 0, "whole steps of 256 threads");
  const BwdParams& p = a.p;
  const int m = blockIdx.x, bh = blockIdx.y, b = bh / p.hq, h = bh % p.hq;
  const float* acc = p.dq_accum + (static_cast<int64_t>(bh) * p.dq_accum_rows + m * T::kBr) * D;
  if constexpr (T::kDQSwap) {
    // The block's dQ_m^T partials, read in their fragment order (coalesced)
    // and written row-major into shared memory, then converted by rows.
    __shared__ float tile[T::kBr][D + 2];
    for (int i = threadIdx.x; i < T::kBr * D / 4; i += blockDim.x) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(acc) + i);
      const int c = 4 * i / (64 * T::kBr), l = 4 * i % (64 * T::kBr);  // consumer c's float l (dq_frag's order)
      const int rest = l / 64, w = rest / 2 / (T::kBr / 8), qi = rest / 2 % (T::kBr / 8), hh = rest % 2;
      const int col = 64 * c + 16 * w + 8 * hh + (l % 64) / 8, q = 8 * qi + (l % 8);  // (l % 8): c2 + e of two lanes' pairs
      tile[q][col] = f.x;
      tile[q + 1][col] = f.y;
      tile[q + 2][col] = f.z;
      tile[q + 3][col] = f.w;
    }
    __syncthreads();
#pragma unroll 4
    for (int i = threadIdx.x; i < T::kBr * D / 2; i += blockDim.x) {
      const int r = i / (D / 2), x = 2 * (i % (D / 2)), row = m * T::kBr + r;
      E* dq = static_cast<E*>(p.dq) + b * p.dq_batch_stride + row * p.dq_row_stride + h * p.dq_head_stride + x;
      if (row < p.nq) *reinterpret_cast<uint32_t*>(dq) = pack<E>(tile[r][x] * p.scale, tile[r][x + 1] * p.scale);
    }
    return;
  }
  float2 v[kSteps];
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int i = threadIdx.x + 256 * k, r = i / (D / 2), x = 2 * (i % (D / 2));
    v[k] = __ldg(reinterpret_cast<const float2*>(acc + dq_acc_index<T>(r, x)));
  }
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int i = threadIdx.x + 256 * k, r = i / (D / 2), x = 2 * (i % (D / 2)), row = m * T::kBr + r;
    E* dq = static_cast<E*>(p.dq) + b * p.dq_batch_stride + row * p.dq_row_stride + h * p.dq_head_stride + x;
    if (row < p.nq) *reinterpret_cast<uint32_t*>(dq) = pack<E>(v[k].x * p.scale, v[k].y * p.scale);
  }
}

// The plain causal pass's CTA order (Sm90BwdArgs::causal_groups > 0): CTA
// lin (the dispatch order, blockIdx.x fastest) takes key block nb of (batch,
// kv head) pair bh. The pairs come in `groups` groups of nearly equal size
// (the first bhs % groups one pair larger), and within a group the key
// blocks heaviest first (nb ascending: key block nb sees the query rows from
// nb Bc - shift on), the group's pairs interleaved. So the last CTAs
// dispatched are light ones. Lightest first, one pair after the other (the
// ordered twin's order, and the host's below 16 key blocks, where the groups
// measured slower), the last pair's heaviest CTA starts among the last and
// ends alone (kernels/dev/tile_order_check.cu models both).
struct BwdCausalOrder {
  int tc, bhs, groups;
  __host__ __device__ void at(int lin, int& nb, int& bh) const {
    const int s = bhs / groups, r = bhs % groups;  // r groups of s + 1 pairs, then groups - r of s
    const int big = r * (s + 1) * tc;
    int g0, gs, off;
    if (lin < big) {
      const int g = lin / ((s + 1) * tc);
      g0 = g * (s + 1), gs = s + 1, off = lin - g * (s + 1) * tc;
    } else {
      const int g = (lin - big) / (s * tc);
      g0 = r * (s + 1) + g * s, gs = s, off = lin - big - g * s * tc;
    }
    nb = off / gs, bh = g0 + off % gs;
  }
};

template <class T, bool kCausal, class E, bool kDet>
__device__ void bwd_kernel(const Sm90BwdArgs& a) {
  constexpr int D = T::kD;
  static_assert(T::kConsumers == 2, "two consumer warpgroups (consumer_sync's ids, consumers_sync's 256 threads)");
  const BwdParams& p = a.p;
  const BwdScratch scr = bwd_scratch(p);
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sK = smem;
  unsigned char* sV = smem + T::kOffV;
  unsigned char* sQ = smem + T::kOffQ;
  unsigned char* sDO = smem + T::kOffDO;
  unsigned char* sDS = smem + T::kOffDS;
  uint64_t* fullKV = reinterpret_cast<uint64_t*>(smem + T::kOffBar);
  uint64_t* fullQ = fullKV + 1;
  uint64_t* emptyQ = fullQ + T::kStages;
  uint64_t* dqFull = emptyQ + T::kStages;  // kDet: consumer c's dQ_m partial is in its buffer
  uint64_t* dqEmpty = dqFull + 2;          // kDet: ... and added: the buffer is free
  if (smem_u32(smem) % 1024 != 0) __trap();  // the 128-byte swizzle's atoms
  const int t = threadIdx.x, wg = __shfl_sync(0xffffffff, t / 128, 0);
  // kDet keeps lightest first: a causal turn then only waits on CTAs dispatched before.
  int nb = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x, bhk = blockIdx.y;
  if (kCausal && !kDet && a.causal_groups > 0)
    BwdCausalOrder{int(gridDim.x), int(gridDim.y), a.causal_groups}.at(blockIdx.x + gridDim.x * blockIdx.y, nb, bhk);
  const int n0 = nb * T::kBc, b = bhk / p.hkv, hk = bhk % p.hkv, grp = p.hq / p.hkv;
  const int shift = p.nk - p.nq;  // causal: query i sees keys <= i + shift
  const int tr = (p.nq + T::kBr - 1) / T::kBr;
  const int m_begin = kCausal ? max(0, n0 - shift) / T::kBr : 0;
  if (t == 0) {
    mbar_init(fullKV, 1);
    for (int st = 0; st < T::kStages; ++st) {
      mbar_init(fullQ + st, 1);
      mbar_init(emptyQ + st, T::kConsumers * 128);
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(dqFull + i, 1);
      mbar_init(dqEmpty + i, 1);
    }
    mbar_init_fence();
  }
  __syncthreads();

  // kDet, non-causal, Tr >= Tc, det_spread (the host's: every CTA of a
  // (b, kv head) resident at once): the key blocks start at query blocks
  // spread over Tr (key block nb at m_start = nb Tr / Tc) and wrap around, so
  // that at each step the CTAs of a (b, kv head) hold different query blocks.
  // The turns at query block m follow arrival: first the key block q(m) whose
  // start is the last one <= m, then q(m) - 1, ..., wrapping; each waits on a
  // CTA that reached m earlier, and no turn waits while they keep pace.
  // Ascending from query block 0 instead, key block j first waits j turns.
  const int tcn = gridDim.x;
  const bool rot = kDet && !kCausal && a.det_spread != 0 && tr >= tcn;
  const int m_start = rot ? nb * tr / tcn : 0;
  auto m_at = [&](int j) {
    if constexpr (!kDet || kCausal) return j;
    else return j + m_start < tr ? j + m_start : j + m_start - tr;
  };
  // The turn of this CTA's key block at query block m (kDet).
  auto turn_of = [&](int m) {
    if (!kCausal) {
      if (!rot) return nb;
      const int q = ((m + 1) * tcn - 1) / tr;
      return q >= nb ? q - nb : q - nb + tcn;
    }
    return min(tcn - 1, (T::kBr * m + T::kBr - 1 + shift) / T::kBc) - nb;
  };
  if (wg == 0) {  // producer
    regs_dec<T::kProducerRegs>();
    if (kDet && t == 32) {  // the dQ writer: its pointers step with m (it runs on the producer's few registers)
      int g = 0;
      for (int h = hk * grp; h < (hk + 1) * grp; ++h) {
        const int64_t bh = static_cast<int64_t>(b) * p.hq + h;
        float* acc = scr.acc + (bh * p.dq_accum_rows + m_at(m_begin) * T::kBr) * D;
        int* turn = scr.turns + bh * (p.dq_accum_rows / T::kBr) + m_at(m_begin);
        for (int j = m_begin; j < tr; ++j, ++g, acc += T::kBr * D, ++turn) {
          const int m = m_at(j), mine = turn_of(m);
          if (rot && j > m_begin && m == 0) {  // wrapped around
            acc -= static_cast<int64_t>(tr) * T::kBr * D;
            turn -= tr;
          }
          mbar_wait(dqFull, g & 1);
          mbar_wait(dqFull + 1, g & 1);
          wait_turn(turn, mine);
          // By columns or rows the two partials are disjoint: one group. By
          // keys both add to the whole block: consumer 0's first, then 1's.
          for (int c = 0; c < 2; ++c) {
            bulk_reduce_add(acc + (T::kDQDisjoint ? c * T::kDQ / 4 : 0), smem + T::kOffDQ + c * T::kDQ, T::kDQ);
            bulk_commit();
            if (!T::kDQDisjoint) bulk_wait_all();
          }
          bulk_wait_all();  // the adds are done in global memory; the proxy fence orders
          asm volatile("fence.proxy.async.global;\n" ::: "memory");  // them (async proxy) before
          st_release(turn, mine + 1);  // the release that hands the next key block its turn
          mbar_arrive(dqEmpty);
          mbar_arrive(dqEmpty + 1);
        }
      }
      return;
    }
    if (t != 0) return;
    mbar_expect_tx(fullKV, 2 * T::kKV);
    for (int xb = 0; xb < D / 64; ++xb) {
      tma_load(sK + xb * T::kKVBlock, a.k_map, fullKV, xb * 64, n0, hk, b);
      tma_load(sV + xb * T::kKVBlock, a.v_map, fullKV, xb * 64, n0, hk, b);
    }
    int g = 0;
    for (int h = hk * grp; h < (hk + 1) * grp; ++h)
      for (int j = m_begin; j < tr; ++j, ++g) {
        const int st = g % T::kStages, m = m_at(j);
        if (g >= T::kStages) mbar_wait(emptyQ + st, ((g / T::kStages) & 1) ^ 1);
        mbar_expect_tx(fullQ + st, 2 * T::kQ + T::kLD);
        const int64_t off = (static_cast<int64_t>(b) * p.hq + h) * p.dq_accum_rows + m * T::kBr;
        bulk_load(smem + T::kOffLD + st * T::kLD, scr.lse2 + off, T::kBr * 4, fullQ + st);
        bulk_load(smem + T::kOffLD + st * T::kLD + T::kBr * 4, scr.di + off, T::kBr * 4, fullQ + st);
        for (int xb = 0; xb < D / 64; ++xb) {
          tma_load(sQ + st * T::kQ + xb * T::kQBlock, a.q_map, fullQ + st, xb * 64, m * T::kBr, h, b);
          tma_load(sDO + st * T::kQ + xb * T::kQBlock, a.do_map, fullQ + st, xb * 64, m * T::kBr, h, b);
        }
      }
    return;
  }

  regs_inc<T::kConsumerRegs>();
  constexpr bool kLateDK = T::kEarlyDV || !kDet || kCausal;
  const int c = wg - 1, tc = t & 127, w = tc >> 5, g8 = (tc >> 2) & 7, c2 = (tc & 3) << 1;
  const unsigned char* kw = sK + c * 64 * 128;  // this consumer's 64 keys: rows 64c.. of every column box
  const unsigned char* vw = sV + c * 64 * 128;
  // Accumulators in mma's C layout per warp: element 4 i + 2 hh + e is row
  // 16 w + g8 + 8 hh, column 8 i + c2 + e (rows: keys for S^T, dP^T, dK, dV;
  // queries for dQ).
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  mbar_wait(fullKV, 0);
  int g = 0;
  for (int h = hk * grp; h < (hk + 1) * grp; ++h) {
    const int64_t bh = static_cast<int64_t>(b) * p.hq + h;
    // m from m_begin up (kDet, non-causal: from m_start, wrapping around to it).
    for (int m = m_at(m_begin), more = m_begin < tr; more; ++g) {
      const int st = g % T::kStages, m0 = m * T::kBr;
      const unsigned char* q = sQ + st * T::kQ;
      const unsigned char* dO = sDO + st * T::kQ;
      unsigned char* sDSg = sDS + (g % T::kDSBufs) * T::kConsumers * T::kDS;  // this block's dS^T, both consumers'
      unsigned char* ds = sDSg + c * T::kDS;
      const float* sl = reinterpret_cast<const float*>(smem + T::kOffLD + st * T::kLD);  // LSE log2(e), then Di
      mbar_wait(fullQ + st, (g / T::kStages) & 1);
      float s[T::kBr / 2], dp[T::kBr / 2];
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < D / 16; ++j)
        wgmma_ss<E>(s, desc(kw + (j / 4) * T::kKVBlock + (j % 4) * 32, 16, 1024), desc(q + (j / 4) * T::kQBlock + (j % 4) * 32, 16, 1024),
                    j > 0);
      wgmma_commit();  // S^T alone: P^T is computed while dP^T's GEMM runs
      fence_regs(s);
#pragma unroll
      for (int j = 0; j < D / 16; ++j)
        wgmma_ss<E>(dp, desc(vw + (j / 4) * T::kKVBlock + (j % 4) * 32, 16, 1024),
                    desc(dO + (j / 4) * T::kQBlock + (j % 4) * 32, 16, 1024), j > 0);
      wgmma_commit();
      fence_regs(dp);
      // LSE of the first two query column groups, loaded under S^T's GEMM
      // (no load moves above the wait); not in the D64 ordered twin without
      // causality, which would spill.
      constexpr int kL = kLateDK ? 2 : 0;
      float2 l0[kL > 0 ? kL : 1];
#pragma unroll
      for (int i = 0; i < kL; ++i) l0[i] = *reinterpret_cast<const float2*>(sl + 8 * i + c2);
      auto lse = [&](int i) { return i < kL ? l0[i < kL ? i : 0] : *reinterpret_cast<const float2*>(sl + 8 * i + c2); };
      wgmma_wait<1>();
      fence_regs(s);
      // P^T in place of S^T. Keys past Nk are masked (their zero-filled
      // scores could overflow exp2 against a very negative LSE); rows past Nq
      // and rows seeing no key have LSE log2(e) = +inf, so P = 0 without a
      // mask, and dS = 0 (dP is finite: TMA fills rows past Nk and Nq with
      // zeros).
      uint32_t pf[T::kBr / 4], df[T::kBr / 4];
      const bool masked = n0 + T::kBc > p.nk || (kCausal && n0 + T::kBc - 1 > m0 + shift);
      if (masked) {
#pragma unroll
        for (int i = 0; i < T::kBr / 8; ++i) {
          const float2 l = lse(i);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int key = n0 + 64 * c + 16 * w + g8 + 8 * hh, qi = m0 + 8 * i + c2, x = 4 * i + 2 * hh;
            s[x] = key < p.nk && (!kCausal || key <= qi + shift) ? p_exp2<T>(fmaf(s[x], p.scale_log2, -l.x)) : 0.f;
            s[x + 1] = key < p.nk && (!kCausal || key <= qi + 1 + shift) ? p_exp2<T>(fmaf(s[x + 1], p.scale_log2, -l.y)) : 0.f;
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < T::kBr / 8; ++i) {
          const float2 l = lse(i);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int x = 4 * i + 2 * hh;
            s[x] = p_exp2<T>(fmaf(s[x], p.scale_log2, -l.x));
            s[x + 1] = p_exp2<T>(fmaf(s[x + 1], p.scale_log2, -l.y));
          }
        }
      }
#pragma unroll
      for (int x = 0; x < T::kBr / 4; ++x) pf[x] = pack<E>(s[2 * x], s[2 * x + 1]);
      auto dv_gemm = [&]() {  // dV += P^T dO_m
#pragma unroll
        for (int j = 0; j < T::kBr / 16; ++j) {  // queries 16 j .. 16 j + 15
          const uint32_t ap[4] = {pf[4 * j], pf[4 * j + 1], pf[4 * j + 2], pf[4 * j + 3]};
          wgmma_rs<E>(dv, ap, desc(dO + j * 16 * 128, T::kQBlock, 1024));
        }
      };
      auto dk_gemm = [&]() {  // dK += dS^T Q_m
#pragma unroll
        for (int j = 0; j < T::kBr / 16; ++j) {
          const uint32_t ad[4] = {df[4 * j], df[4 * j + 1], df[4 * j + 2], df[4 * j + 3]};
          wgmma_rs<E>(dk, ad, desc(q + j * 16 * 128, T::kQBlock, 1024));
        }
      };
      if constexpr (T::kEarlyDV) {  // dS^T is computed under dV's GEMM
        fence_regs(dv);
        fence_regs(pf);
        wgmma_fence();
        dv_gemm();
        wgmma_commit();
        fence_regs(dv);
        wgmma_wait<1>();  // dP^T is in; dV's GEMM may still run
      } else {
        wgmma_wait<0>();
      }
      fence_regs(dp);
      // Di of queries 8 i + c2, + 1, loaded kAhead i ahead: ptxas cannot
      // tell sl from ds, so it keeps each load behind the stores before it,
      // and a load right before its use leaves every dS waiting for it. The
      // ordered causal twin has no registers for it.
      constexpr int kAhead = T::kEarlyDV || (kDet && kCausal) ? 0 : 4;
      const float2* di = reinterpret_cast<const float2*>(sl + T::kBr + c2);
      constexpr int kRing = kAhead > 0 ? kAhead : 1;
      float2 dn[kRing];
#pragma unroll
      for (int a = 0; a < kAhead; ++a) dn[a] = di[4 * a];
#pragma unroll
      for (int i = 0; i < T::kBr / 8; ++i) {
        const float2 d_i = dn[i % kRing];
        if (kAhead > 0 && i + kAhead < T::kBr / 8) dn[i % kRing] = di[4 * (i + kAhead)];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int x = 4 * i + 2 * hh;
          const float2 d = kAhead > 0 ? d_i : di[4 * i];
          float2 pv = make_float2(s[x], s[x + 1]);
          if constexpr (T::kDSFromP) pv = fa2::to_float2(*reinterpret_cast<const typename fa2::Pair<E>::type*>(&pf[2 * i + hh]));
          dp[x] = pv.x * (dp[x] - d.x);
          dp[x + 1] = pv.y * (dp[x + 1] - d.y);
          df[2 * i + hh] = pack<E>(dp[x], dp[x + 1]);
          // dS^T to shared memory (64 keys x Br queries in boxes of 64, swizzled), dQ's A read M-major.
          if constexpr (!T::kEarlyDV) *reinterpret_cast<uint32_t*>(ds + ds_off<T>(16 * w + g8 + 8 * hh, 8 * i + c2)) = df[2 * i + hh];
        }
      }
      if constexpr (T::kEarlyDV) {  // dS^T stored for dQ after the subtractions
#pragma unroll
        for (int i = 0; i < T::kBr / 8; ++i)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh)
            *reinterpret_cast<uint32_t*>(ds + ds_off<T>(16 * w + g8 + 8 * hh, 8 * i + c2)) = df[2 * i + hh];
      }
      fence_proxy_async();
      if constexpr (T::kDQDisjoint) consumers_sync();  // dQ reads both consumers' dS^T
      else consumer_sync<2>(c);
      float dq[T::kDQRegs];
#pragma unroll
      for (int i = 0; i < T::kDQRegs; ++i) dq[i] = 0.f;
      // ptxas would move the zeroing and the packing into the batch and serialise it.
      fence_regs(dv);
      fence_regs(dk);
      fence_regs(dq);
      fence_regs(pf);
      fence_regs(df);
      wgmma_fence();
      if constexpr (!T::kEarlyDV) dv_gemm();
      if constexpr (!kLateDK) dk_gemm();
      if constexpr (T::kDQSwap) {
#pragma unroll
        for (int kk = 0; kk < T::kBc / 16; ++kk)  // every key, 16 kk .. 16 kk + 15; dQ_m^T's rows: columns 64c ..
          wgmma_tt<E>(dq, desc(sK + c * T::kKVBlock + kk * 16 * 128, T::kKVBlock, 1024), desc_il(sDSg + kk * 2 * T::kBr * 16, T::kBr * 16, 128));
      } else if constexpr (T::kDQByCols) {
#pragma unroll
        for (int kk = 0; kk < T::kBc / 16; ++kk)  // every key, 16 kk .. 16 kk + 15; columns 64c ..
          wgmma_tt<E>(dq, desc(sDSg + kk * 16 * 128, T::kQBlock, 1024), desc(sK + c * T::kKVBlock + kk * 16 * 128, T::kKVBlock, 1024));
      } else if constexpr (T::kDQByRows) {
#pragma unroll
        for (int kk = 0; kk < T::kBc / 16; ++kk)  // every key; queries 64c .. (box c of each consumer's dS^T)
          wgmma_tt<E>(dq, desc(sDSg + kk / 4 * T::kDS + c * 64 * 128 + kk % 4 * 16 * 128, 64 * 128, 1024),
                      desc(sK + kk * 16 * 128, T::kKVBlock, 1024));
      } else {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // this consumer's keys 16 kk .. 16 kk + 15
          wgmma_tt<E>(dq, desc(ds + kk * 16 * 128, T::kQBlock, 1024), desc(kw + kk * 16 * 128, T::kKVBlock, 1024));
      }
      wgmma_commit();
      if constexpr (kLateDK) {  // dK's GEMM runs under dQ_m's epilogue, waited for at the block's end
        dk_gemm();
        wgmma_commit();
        wgmma_wait<1>();
      } else {
        fence_regs(pf);
        fence_regs(df);
        wgmma_wait<0>();
        fence_regs(dv);
        fence_regs(dk);
        mbar_arrive(emptyQ + st);
      }
      fence_regs(dq);
      // The block's partial in fragment order (by columns or rows: consumer
      // c's 64 x 64 at c * 64 * 64; kDQSwap: its 64 x Br at c * 64 * Br).
      float* buf = reinterpret_cast<float*>(smem + T::kOffDQ + c * T::kDQ);
      if constexpr (kDet) {
        if (g > 0) mbar_wait(dqEmpty + c, (g - 1) & 1);  // the writer has added the last block's
      } else if (tc == 0) {
        bulk_wait_read();  // the last block's reduce has read buf
      }
      // With one dS^T buffer, split by columns or rows, this barrier also keeps
      // it until both consumers' dQ GEMMs are done with it (the next block
      // rewrites it).
      if constexpr (T::kDSBufs == 1 && T::kDQDisjoint) consumers_sync();
      else consumer_sync<2>(c);  // buf is free (tc 0 waited)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int i = 0; i < T::kDQRegs / 4; ++i)  // the accumulator's 64 x 2 kDQRegs (kDQSwap: dQ_m^T's)
          *reinterpret_cast<float2*>(buf + dq_frag(16 * w + g8 + 8 * hh, 8 * i + c2, 2 * T::kDQRegs)) =
              make_float2(dq[4 * i + 2 * hh], dq[4 * i + 2 * hh + 1]);
      fence_proxy_async();
      consumer_sync<2>(c);
      if (tc == 0) {  // rows past Nq add zeros to the accumulator's padding rows
        if constexpr (kDet) {
          mbar_arrive(dqFull + c);  // the writer adds it
        } else {
          bulk_reduce_add(scr.acc + (bh * p.dq_accum_rows + m0) * D + (T::kDQDisjoint ? c * T::kDQ / 4 : 0), buf, T::kDQ);
          bulk_commit();
        }
      }
      if constexpr (kLateDK) {
        wgmma_wait<0>();
        fence_regs(dv);
        fence_regs(dk);
        fence_regs(pf);
        fence_regs(df);
        mbar_arrive(emptyQ + st);
      }
      if constexpr (kDet && !kCausal) {
        m = m + 1 == tr ? 0 : m + 1;
        more = m != m_start;
      } else {
        more = ++m < tr;
      }
    }
  }
  if (!kDet && tc == 0) bulk_wait_all();
  E* gk = static_cast<E*>(p.dk);
  E* gv = static_cast<E*>(p.dv);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = n0 + 64 * c + 16 * w + g8 + 8 * hh;
    if (key >= p.nk) continue;
    E* rk = gk + b * p.dk_batch_stride + static_cast<int64_t>(key) * p.dk_row_stride + hk * p.dk_head_stride;
    E* rv = gv + b * p.dv_batch_stride + static_cast<int64_t>(key) * p.dv_row_stride + hk * p.dv_head_stride;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      *reinterpret_cast<uint32_t*>(rk + 8 * i + c2) = pack<E>(dk[4 * i + 2 * hh] * p.scale, dk[4 * i + 2 * hh + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(rv + 8 * i + c2) = pack<E>(dv[4 * i + 2 * hh], dv[4 * i + 2 * hh + 1]);
    }
  }
}

}  // namespace sm90
