// bwd_sm90_check.cu: lab harness for a Hopper (sm_90a) backward, llm.c dev/cuda
// style: the kernel, a float64 CPU check and a timing loop in one file. Not part
// of the build; when it passes and beats the sm_80 single pass, its kernel moves
// into kernels/ (bwd_sm90.cuh, fa2_sm90a.cu), the plan runs it, its check joins
// bwd_check.cu (a -DFA2_SM90A mode, as fwd_check.cu's) and this file goes.
//
// Versions (each kept in the git history of this file):
//   v1  FA3's structure, simplest form. One CTA per (key block of Bn = 128,
//       b, kv head); one producer warpgroup (TMA: K, V once; Q_m, dO_m per query
//       block of Bm = 64 into a 2-stage ring) and two consumer warpgroups of 64
//       keys each, holding their dK and dV in registers over every query block
//       of the GQA group's heads. Per query block, all with wgmma:
//         S^T  = K Q_m^T           (ss, m64n64)     P^T  = exp2(S^T scale_log2 - LSE_m log2 e)
//         dP^T = V dO_m^T          (ss, m64n64)     dS^T = P^T (dP^T - Di_m)
//         dV  += P^T dO_m          (rs, m64nD: P^T from the S^T accumulators, as the forward's P)
//         dK  += dS^T Q_m          (rs, m64nD)
//         dQ_m += dS K_wg          (ss, A = dS^T stored to shared memory, read M-major)
//       dQ_m's two partials (one per consumer's 64 keys) go to an fp32
//       accumulator (B, Hq, Tr*Bm, D) with atomics; LSE and Di are read from
//       global memory per element; every block takes the causal/bounds mask.
//   v2  v1 with P^T computed while dP^T's GEMM runs (S^T and dP^T committed
//       as two groups; the registers pinned so that ptxas does not serialise
//       the wgmmas), and dQ_m's partials stored to shared memory in fragment
//       order (dq_frag) and added by one TMA bulk reduce-add per consumer and
//       query block instead of 64 x D atomics; at D128 dQ is split by columns
//       (each consumer 64 columns over all 128 keys, 32 registers) instead of
//       by keys (64 registers).
//   v3  v2 in a fixed order (Options.Deterministic): the key blocks add their
//       dQ_m partials in a fixed order (causal: descending, the CTAs taking
//       the key blocks last to first), a turn counter per query block in
//       global memory; a warp of the producer warpgroup (the dQ writer) waits
//       for the turn and issues the bulk reduce-adds, the consumers hand it
//       their buffers by mbarriers.
//   v4  v2 with LSE and Di staged in shared memory: the pre kernel's work
//       (here the host's) writes them padded to (B, Hq, rows), LSE already
//       in log2 units and +inf where P must be 0 (a row past Nq or seeing no
//       key), and the producer copies each query block's 2 x 256 B with the
//       stage's Q_m and dO_m (1D bulk copies on the same mbarrier); the mask
//       runs only on the blocks that need it (the last key block, the
//       causal diagonal's).
//   v5  v3 (deterministic) with v4's staging.
//   Not yet: persistence, ping-pong between the consumers, Bm = 128 at D64.
//
// Build on the GPU machine (nvcc 12.3+), from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v kernels/dev/bwd_sm90_check.cu -o .build/bwd_sm90 -ldl
//   .build/bwd_sm90 check [v]    # odd shapes, v1-v3, fp16 and bf16, D 64 and 128, causal and not, GQA; v3 bit-reproducible
//   .build/bwd_sm90 bench [v]    # FA2 paper shapes (16k tokens, hidden 2048), TFLOP/s: v1-v3 fp16, v2-v3 bf16
// Here (no GPU): $(kernels/cuda12.sh) -O3 -std=c++17 -cubin -gencode arch=compute_90a,code=sm_90a -Xptxas -v kernels/dev/bwd_sm90_check.cu
//
// Check rule (as bwd_check.cu): inputs ~ N(0,1) rounded to 16 bits; O, LSE from
// the float64 forward; truth = float64 gradients; the GPU's max error per
// output must be within 2x a baseline that rounds P and dS to the 16-bit type
// plus 4 unit roundoffs of the largest |truth|.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "dev.h"
#include "../tma.cuh"
#include "../wgmma.cuh"


namespace sm90 {
// dQ's GEMM: d (64 x N) += A (64 x 16 in shared memory, M-major: trans-a 1) .
// B (16 x N in shared memory, N-major: trans-b 1); N = 2 x d's floats.
template <class E>
__device__ __forceinline__ void wgmma_tt(float (&d)[64], uint64_t a, uint64_t b) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value)
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) : "l"(a), "l"(b));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) : "l"(a), "l"(b));
}
template <class E>
__device__ __forceinline__ void wgmma_tt(float (&d)[32], uint64_t a, uint64_t b) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value)
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) : "l"(a), "l"(b));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 1, 1;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) : "l"(a), "l"(b));
}
}  // namespace sm90

using namespace sm90;

constexpr float kLog2e = 1.4426950408889634f;

// The kernel's argument, a __grid_constant__ so that TMA reads the maps in
// parameter space: Q, K, V, dO as CUtensorMaps (dims D, N, H, B).
struct alignas(64) BwdArgs {
  unsigned char q_map[128], k_map[128], v_map[128], do_map[128];
  const float* lse;  // (B, Hq, Nq), natural log; -inf: the row sees no key
  const float* di;   // (B, Hq, Nq): rowsum(dO * O)
  const float* lse2; // v4+: (B, Hq, rows), LSE log2 e, +inf where P is 0 (padding, rows seeing no key)
  const float* dip;  // v4+: (B, Hq, rows), Di, 0 past Nq
  float* dq_accum;   // (B, Hq, rows, D), zeroed; dQ / scale
  int* dq_order;     // v3: (B, Hq, rows / 64), zeroed: the key blocks' turns per query block
  void* dk;          // (B, Nk, Hkv, D), 16-bit
  void* dv;
  int b, nq, nk, hq, hkv, rows;
  float scale, scale_log2;
};

template <int D_>
struct Tile {
  static constexpr int kD = D_, kBn = 128, kBm = 64, kStages = 2;
  static constexpr int kThreads = 384;                 // producer + 2 consumer warpgroups of 64 keys
  static constexpr int kKVBlock = kBn * 128;           // one 64-column block of K or V (bytes)
  static constexpr int kQBlock = kBm * 128;            // one 64-column block of Q_m or dO_m
  static constexpr int kKV = kBn * kD * 2, kQ = kBm * kD * 2;
  static constexpr int kDS = 64 * kBm * 2;             // one consumer's dS^T (64 keys x Bm queries)
  static constexpr int kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + kStages * kQ, kOffDS = kOffDO + kStages * kQ;
  // v2's dQ_m: at D128 consumer c computes columns 64c.. over all Bn keys
  // (dQ split by columns: 32 accumulator registers, not 64), at D64 all
  // columns over its own 64 keys (split by keys).
  static constexpr bool kDQByCols = kD == 128;
  static constexpr int kDQCols = kDQByCols ? 64 : kD;
  static constexpr int kDQ = kBm * kDQCols * 4;        // one consumer's dQ_m partial, fp32 (v2)
  static constexpr int kOffDQ = kOffDS + 2 * kDS;
  static constexpr int kOffLD = kOffDQ + 2 * kDQ;     // v4+: per stage Bm floats of LSE log2 e, then Bm of Di
  static constexpr int kLD = 2 * kBm * 4;
  static constexpr int kOffBar = kOffLD + kStages * kLD;
  static constexpr int kSmem = kOffBar + 8 * (1 + 2 * kStages + 4);
};

// v2's dQ: a consumer's 64 x D partial goes to shared memory in fragment
// order (dq_frag: each warp's 32 lanes store 64 consecutive floats per
// (column block of 8, row half)), then one TMA bulk reduce-add of the whole
// 64 x D block into the accumulator, laid out in the same order.
__host__ __device__ inline int dq_frag(int r, int x, int d) {  // r < 64, x < d
  const int w = r / 16, hh = (r % 16) / 8, g8 = r % 8, i = x / 8, c2 = x % 8 & ~1, e = x & 1;
  return ((w * (d / 8) + i) * 2 + hh) * 64 + (4 * g8 + c2 / 2) * 2 + e;
}
__device__ __forceinline__ void bulk_reduce_add(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Until *p == want, then acquire (GPU scope) and order the async proxy
// (the bulk reduce-add that follows) after it. The spin reads relaxed: an
// acquire load per spin invalidates the SM's L1 (CCTL.IVALL), which the
// consumers read LSE and Di through. A turn that never comes traps after
// about 2^34 cycles (~9 s) instead of hanging the lab.
__device__ __forceinline__ void wait_turn(const int* p, int want) {
  const long long t0 = clock64();
  for (;;) {
    int v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    if (v == want) break;
    __nanosleep(64);
    if (clock64() - t0 > (1ll << 34)) __trap();
  }
  asm volatile("fence.acq_rel.gpu;\nfence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Both consumer warpgroups (256 threads): named barrier 5, after the turns'
// and consumer_sync's ids.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 5, 256;\n" ::: "memory"); }

// V: the version (the header's list): 1, 2 or 3.
template <class T, bool kCausal, class E, int V>
__global__ void __launch_bounds__(T::kThreads, 1) bwd_kernel(const __grid_constant__ BwdArgs a) {
  constexpr int D = T::kD;
  constexpr bool kDet = V == 3 || V == 5, kStaged = V >= 4;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sK = smem;
  unsigned char* sV = smem + T::kOffV;
  unsigned char* sQ = smem + T::kOffQ;
  unsigned char* sDO = smem + T::kOffDO;
  unsigned char* sDS = smem + T::kOffDS;
  uint64_t* fullKV = reinterpret_cast<uint64_t*>(smem + T::kOffBar);
  uint64_t* fullQ = fullKV + 1;
  uint64_t* emptyQ = fullQ + T::kStages;
  uint64_t* dqFull = emptyQ + T::kStages;  // v3: consumer c's dQ_m partial is in its buffer
  uint64_t* dqEmpty = dqFull + 2;          // v3: ... and added: the buffer is free
  if (smem_u32(smem) % 1024 != 0) __trap();
  const int t = threadIdx.x, wg = __shfl_sync(0xffffffff, t / 128, 0);
  // Causal: CTA x takes key block Tc - 1 - x, the lightest first (the last
  // key blocks reach the fewest query blocks), so that v3's turns, which go
  // down from each query block's last key block, wait only on CTAs
  // dispatched before (FA3's order).
  const int nb = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int n0 = nb * T::kBn, b = blockIdx.y / a.hkv, hk = blockIdx.y % a.hkv, grp = a.hq / a.hkv;
  const int shift = a.nk - a.nq;  // causal: query i sees keys <= i + shift
  const int tr = (a.nq + T::kBm - 1) / T::kBm;
  const int m_begin = kCausal ? max(0, n0 - shift) / T::kBm : 0;
  if (t == 0) {
    mbar_init(fullKV, 1);
    for (int st = 0; st < T::kStages; ++st) {
      mbar_init(fullQ + st, 1);
      mbar_init(emptyQ + st, 256);
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(dqFull + i, 1);
      mbar_init(dqEmpty + i, 1);
    }
    mbar_init_fence();
  }
  __syncthreads();

  // v3 (deterministic): the key blocks add their dQ_m partials in a fixed
  // order, one counter per query block, by columns both halves in one turn,
  // by keys consumer 0's then 1's. The waiting is a warp of the producer
  // warpgroup's (the dQ writer, as FA3's): in a consumer, the wait loop
  // spilled 60-76 B at D128; the writer, on the producer's 24 registers,
  // keeps some of its loop state in local memory instead.
  // The turn of this CTA's key block nb at query block m: non-causal
  // ascending (every key block reaches every query block), causal
  // descending from m's last key block (the key blocks that reach m are 0 ..
  // n_max(m), the CTAs of n_max(m) .. 0 in dispatch order).
  auto turn_of = [&](int m) {
    if (!kCausal) return nb;
    return min(static_cast<int>(gridDim.x) - 1, (T::kBm * m + T::kBm - 1 + shift) / T::kBn) - nb;
  };
  if (wg == 0) {  // producer
    regs_dec<24>();
    if (kDet && t == 32) {  // the dQ writer
      int g = 0;
      for (int h = hk * grp; h < (hk + 1) * grp; ++h) {
        const int64_t bh = static_cast<int64_t>(b) * a.hq + h;
        for (int m = m_begin; m < tr; ++m, ++g) {
          float* acc = a.dq_accum + (bh * a.rows + m * T::kBm) * D;
          int* turn = a.dq_order + bh * (a.rows / T::kBm) + m;
          const int mine = turn_of(m);
          mbar_wait(dqFull, g & 1);
          mbar_wait(dqFull + 1, g & 1);
          wait_turn(turn, mine);
          // By columns the two halves are disjoint: one group. By keys both
          // add to the whole block: consumer 0's first, then 1's.
          for (int c = 0; c < 2; ++c) {
            bulk_reduce_add(acc + (T::kDQByCols ? c * T::kBm * 64 : 0), smem + T::kOffDQ + c * T::kDQ, T::kDQ);
            bulk_commit();
            if (!T::kDQByCols) bulk_wait_all();
          }
          bulk_wait_all();             // the adds are done in global memory, and the release
          st_release(turn, mine + 1);  // makes them visible before the next key block's turn
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
      for (int m = m_begin; m < tr; ++m, ++g) {
        const int st = g % T::kStages;
        if (g >= T::kStages) mbar_wait(emptyQ + st, ((g / T::kStages) & 1) ^ 1);
        mbar_expect_tx(fullQ + st, 2 * T::kQ + (kStaged ? T::kLD : 0));
        if constexpr (kStaged) {
          const int64_t off = (static_cast<int64_t>(b) * a.hq + h) * a.rows + m * T::kBm;
          bulk_load(smem + T::kOffLD + st * T::kLD, a.lse2 + off, T::kBm * 4, fullQ + st);
          bulk_load(smem + T::kOffLD + st * T::kLD + T::kBm * 4, a.dip + off, T::kBm * 4, fullQ + st);
        }
        for (int xb = 0; xb < D / 64; ++xb) {
          tma_load(sQ + st * T::kQ + xb * T::kQBlock, a.q_map, fullQ + st, xb * 64, m * T::kBm, h, b);
          tma_load(sDO + st * T::kQ + xb * T::kQBlock, a.do_map, fullQ + st, xb * 64, m * T::kBm, h, b);
        }
      }
    return;
  }

  regs_inc<240>();
  const int c = wg - 1, tc = t & 127, w = tc >> 5, g8 = (tc >> 2) & 7, c2 = (tc & 3) << 1;
  const unsigned char* kw = sK + c * 64 * 128;  // this consumer's 64 keys: rows 64c.. of every column block
  const unsigned char* vw = sV + c * 64 * 128;
  unsigned char* ds = sDS + c * T::kDS;
  // Accumulators in mma's C layout per warp: element 4 i + 2 hh + e is row
  // 16 w + g8 + 8 hh, column 8 i + c2 + e (rows: keys for S^T, dP^T, dK, dV;
  // queries for dQ).
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  mbar_wait(fullKV, 0);
  int g = 0;
  for (int h = hk * grp; h < (hk + 1) * grp; ++h) {
    const int64_t bh = static_cast<int64_t>(b) * a.hq + h;
    for (int m = m_begin; m < tr; ++m, ++g) {
      const int st = g % T::kStages, m0 = m * T::kBm;
      const unsigned char* q = sQ + st * T::kQ;
      const unsigned char* dO = sDO + st * T::kQ;
      mbar_wait(fullQ + st, (g / T::kStages) & 1);
      float s[32], dp[32];
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < D / 16; ++j)
        wgmma_ss<E>(s, desc(kw + (j / 4) * T::kKVBlock + (j % 4) * 32, 16, 1024),
                    desc(q + (j / 4) * T::kQBlock + (j % 4) * 32, 16, 1024), j > 0);
      if constexpr (V >= 2) {  // S^T alone: P^T is computed while dP^T's GEMM runs
        wgmma_commit();
        fence_regs(s);
      }
#pragma unroll
      for (int j = 0; j < D / 16; ++j)
        wgmma_ss<E>(dp, desc(vw + (j / 4) * T::kKVBlock + (j % 4) * 32, 16, 1024),
                    desc(dO + (j / 4) * T::kQBlock + (j % 4) * 32, 16, 1024), j > 0);
      wgmma_commit();
      fence_regs(dp);
      if constexpr (V >= 2) wgmma_wait<1>();
      else wgmma_wait<0>();
      fence_regs(s);
      // P^T and dS^T in place of S^T and dP^T; packed as the A operands of dV and dK.
      // A masked score (a key past Nk or the diagonal, a query past Nq or
      // seeing no key) has P = 0, so dS = 0 too (dP is finite: TMA fills
      // rows past Nk and Nq with zeros).
      uint32_t pf[16], df[16];
      const float* sl = reinterpret_cast<const float*>(smem + T::kOffLD + st * T::kLD);  // v4+: LSE log2 e, then Di
      if constexpr (kStaged) {
        // Keys past Nk must be masked (their zero-filled scores could
        // overflow exp2 against a very negative LSE); rows past Nq and rows
        // seeing no key have LSE log2 e = +inf, so P = 0 without a mask.
        const bool masked = n0 + T::kBn > a.nk || (kCausal && n0 + T::kBn - 1 > m0 + shift);
        if (masked) {
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const float2 l = *reinterpret_cast<const float2*>(sl + 8 * i + c2);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int key = n0 + 64 * c + 16 * w + g8 + 8 * hh, qi = m0 + 8 * i + c2, x = 4 * i + 2 * hh;
              s[x] = key < a.nk && (!kCausal || key <= qi + shift) ? exp2f(fmaf(s[x], a.scale_log2, -l.x)) : 0.f;
              s[x + 1] = key < a.nk && (!kCausal || key <= qi + 1 + shift) ? exp2f(fmaf(s[x + 1], a.scale_log2, -l.y)) : 0.f;
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const float2 l = *reinterpret_cast<const float2*>(sl + 8 * i + c2);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int x = 4 * i + 2 * hh;
              s[x] = exp2f(fmaf(s[x], a.scale_log2, -l.x));
              s[x + 1] = exp2f(fmaf(s[x + 1], a.scale_log2, -l.y));
            }
          }
        }
#pragma unroll
        for (int x = 0; x < 16; ++x) pf[x] = pack<E>(s[2 * x], s[2 * x + 1]);
      } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int key = n0 + 64 * c + 16 * w + g8 + 8 * hh;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int qi = m0 + 8 * i + c2 + e, x = 4 * i + 2 * hh + e;
            const float lse = qi < a.nq ? a.lse[bh * a.nq + qi] : -INFINITY;
            const bool ok = key < a.nk && lse != -INFINITY && (!kCausal || key <= qi + shift);
            s[x] = ok ? exp2f(s[x] * a.scale_log2 - lse * kLog2e) : 0.f;
          }
          pf[2 * i + hh] = pack<E>(s[4 * i + 2 * hh], s[4 * i + 2 * hh + 1]);
        }
      }
      if constexpr (V >= 2) wgmma_wait<0>();
      fence_regs(dp);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int qi = m0 + 8 * i + c2 + e, x = 4 * i + 2 * hh + e;
            const float di = kStaged ? sl[T::kBm + 8 * i + c2 + e] : qi < a.nq ? a.di[bh * a.nq + qi] : 0.f;
            dp[x] = s[x] * (dp[x] - di);
          }
          df[2 * i + hh] = pack<E>(dp[4 * i + 2 * hh], dp[4 * i + 2 * hh + 1]);
          // dS^T to shared memory (64 keys x Bm queries, swizzled), dQ's A read M-major.
          *reinterpret_cast<uint32_t*>(ds + swz<64>(16 * w + g8 + 8 * hh, 8 * i + c2)) = df[2 * i + hh];
        }
      fence_proxy_async();
      constexpr bool kByCols = V >= 2 && T::kDQByCols;
      if constexpr (kByCols) consumers_sync();  // dQ reads both consumers' dS^T
      else consumer_sync<2>(c);
      float dq[kByCols ? 32 : D / 2];
#pragma unroll
      for (int i = 0; i < (kByCols ? 32 : D / 2); ++i) dq[i] = 0.f;
      fence_regs(dv);
      fence_regs(dk);
      if constexpr (V >= 2) {  // ptxas would move the zeroing and the packing into the batch and serialise it
        fence_regs(dq);
        fence_regs(pf);
        fence_regs(df);
      }
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < T::kBm / 16; ++j) {  // queries 16 j .. 16 j + 15
        const uint32_t ap[4] = {pf[4 * j], pf[4 * j + 1], pf[4 * j + 2], pf[4 * j + 3]};
        wgmma_rs<E>(dv, ap, desc(dO + j * 16 * 128, T::kQBlock, 1024));
      }
#pragma unroll
      for (int j = 0; j < T::kBm / 16; ++j) {
        const uint32_t ad[4] = {df[4 * j], df[4 * j + 1], df[4 * j + 2], df[4 * j + 3]};
        wgmma_rs<E>(dk, ad, desc(q + j * 16 * 128, T::kQBlock, 1024));
      }
      if constexpr (kByCols) {
#pragma unroll
        for (int kk = 0; kk < T::kBn / 16; ++kk)  // every key, 16 kk .. 16 kk + 15; columns 64c ..
          wgmma_tt<E>(dq, desc(sDS + kk * 16 * 128, T::kQBlock, 1024), desc(sK + c * T::kKVBlock + kk * 16 * 128, T::kKVBlock, 1024));
      } else {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // this consumer's keys 16 kk .. 16 kk + 15
          wgmma_tt<E>(dq, desc(ds + kk * 16 * 128, T::kQBlock, 1024), desc(kw + kk * 16 * 128, T::kKVBlock, 1024));
      }
      wgmma_commit();
      fence_regs(pf);
      fence_regs(df);
      wgmma_wait<0>();
      fence_regs(dv);
      fence_regs(dk);
      fence_regs(dq);
      mbar_arrive(emptyQ + st);
      float* acc = a.dq_accum + (bh * a.rows + m0) * D;
      if constexpr (V >= 2) {
        // The block's accumulator in fragment order (dq_frag) per consumer's
        // columns: by columns, consumer c's 64 x 64 at c * 64 * 64.
        float* buf = reinterpret_cast<float*>(smem + T::kOffDQ + c * T::kDQ);
        if constexpr (kDet) {
          if (g > 0) mbar_wait(dqEmpty + c, (g - 1) & 1);  // the writer has added the last block's
        } else if (tc == 0) {
          bulk_wait_read();  // the last block's reduce has read buf
        }
        // By columns, this barrier also keeps dS^T until both consumers' dQ
        // GEMMs are done with it (the next block rewrites it).
        if constexpr (kByCols) consumers_sync();
        else consumer_sync<2>(c);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int i = 0; i < T::kDQCols / 8; ++i)
            *reinterpret_cast<float2*>(buf + dq_frag(16 * w + g8 + 8 * hh, 8 * i + c2, T::kDQCols)) =
                make_float2(dq[4 * i + 2 * hh], dq[4 * i + 2 * hh + 1]);
        fence_proxy_async();
        consumer_sync<2>(c);
        if (tc == 0) {  // rows past Nq add zeros to the accumulator's padding rows
          if constexpr (kDet) {
            mbar_arrive(dqFull + c);  // the writer adds it
          } else {
            bulk_reduce_add(acc + (kByCols ? c * T::kBm * 64 : 0), buf, T::kDQ);
            bulk_commit();
          }
        }
      } else {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = 16 * w + g8 + 8 * hh;
          if (m0 + r >= a.nq) continue;
#pragma unroll
          for (int i = 0; i < D / 8; ++i) {
            atomicAdd(acc + r * D + 8 * i + c2, dq[4 * i + 2 * hh]);
            atomicAdd(acc + r * D + 8 * i + c2 + 1, dq[4 * i + 2 * hh + 1]);
          }
        }
        consumer_sync<2>(c);  // every warp's dQ GEMM is done with dS^T before the next block rewrites it
      }
    }
  }
  if (V >= 2 && !kDet && tc == 0) bulk_wait_all();
  E* gk = static_cast<E*>(a.dk);
  E* gv = static_cast<E*>(a.dv);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = n0 + 64 * c + 16 * w + g8 + 8 * hh;
    if (key >= a.nk) continue;
    const int64_t row = (static_cast<int64_t>(b) * a.nk + key) * a.hkv + hk;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      *reinterpret_cast<uint32_t*>(gk + row * D + 8 * i + c2) = pack<E>(dk[4 * i + 2 * hh] * a.scale, dk[4 * i + 2 * hh + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(gv + row * D + 8 * i + c2) = pack<E>(dv[4 * i + 2 * hh], dv[4 * i + 2 * hh + 1]);
    }
  }
}

// ---------------------------------------------------------------------------
// Host: tensor maps, launch, float64 reference, check and bench.

// The map of a BSHD tensor (B, N, H, D) of 16-bit elements in boxes of 64 x rows.
template <class E>
static void make_map(unsigned char* out, const void* base, int b, int n, int h, int d, int rows) {
  const CUresult r = tensor_map16(out, std::is_same<E, __nv_bfloat16>::value, base, d, n, h, b, int64_t(h) * d, d, int64_t(n) * h * d, rows);
  if (r != CUDA_SUCCESS) std::exit((std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r)), 1));
}

template <class E>
static float to_f(E x) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) return __bfloat162float(x);
  else return __half2float(x);
}
template <class E>
static E from_f(float x) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <class E>
static double rnd(double x) { return to_f<E>(from_f<E>(float(x))); }

struct Problem {
  int b, nq, nk, hq, hkv, d;
  bool causal;
};

// The gradients of one problem: truth (float64), the baseline (P and dS
// rounded to E, outputs rounded) and the GPU's; O, LSE and Di as the kernel reads them.
template <class E>
struct Run {
  Problem pr;
  std::vector<E> q, k, v, dout;
  std::vector<float> lse, di;
  std::vector<double> tq, tk, tv, bq, bk, bv;  // truth, baseline
};

template <class E>
static Run<E> reference(const Problem& pr, uint32_t seed) {
  Run<E> r{pr};
  const int B = pr.b, Nq = pr.nq, Nk = pr.nk, Hq = pr.hq, Hkv = pr.hkv, D = pr.d, grp = Hq / Hkv;
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<E>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = from_f<E>(nd(gen));
  };
  fill(r.q, size_t(B) * Nq * Hq * D);
  fill(r.k, size_t(B) * Nk * Hkv * D);
  fill(r.v, size_t(B) * Nk * Hkv * D);
  fill(r.dout, size_t(B) * Nq * Hq * D);
  r.lse.assign(size_t(B) * Hq * Nq, 0.f);
  r.di.assign(size_t(B) * Hq * Nq, 0.f);
  for (auto* x : {&r.tq, &r.bq}) x->assign(r.q.size(), 0.0);
  for (auto* x : {&r.tk, &r.tv, &r.bk, &r.bv}) x->assign(r.k.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(D));
  auto Q = [&](int b, int i, int h, int x) { return double(to_f<E>(r.q[((size_t(b) * Nq + i) * Hq + h) * D + x])); };
  auto K = [&](int b, int j, int h, int x) { return double(to_f<E>(r.k[((size_t(b) * Nk + j) * Hkv + h) * D + x])); };
  auto V = [&](int b, int j, int h, int x) { return double(to_f<E>(r.v[((size_t(b) * Nk + j) * Hkv + h) * D + x])); };
  auto dO = [&](int b, int i, int h, int x) { return double(to_f<E>(r.dout[((size_t(b) * Nq + i) * Hq + h) * D + x])); };
  std::vector<double> p(Nk), dp(Nk), o(D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      const int hk = h / grp;
      for (int i = 0; i < Nq; ++i) {
        double mx = -INFINITY;
        const int last = pr.causal ? std::min(Nk - 1, i + Nk - Nq) : Nk - 1;
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int x = 0; x < D; ++x) s += Q(b, i, h, x) * K(b, j, hk, x);
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        const size_t li = (size_t(b) * Hq + h) * Nq + i;
        if (last < 0) {
          r.lse[li] = -INFINITY;
          continue;  // no key: O = 0, gradients 0
        }
        double l = 0;
        for (int j = 0; j <= last; ++j) l += (p[j] = std::exp(p[j] - mx));
        for (int j = 0; j <= last; ++j) p[j] /= l;
        r.lse[li] = float(mx + std::log(l));
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j <= last; ++j)
          for (int x = 0; x < D; ++x) o[x] += p[j] * V(b, j, hk, x);
        double di = 0;
        for (int x = 0; x < D; ++x) di += dO(b, i, h, x) * rnd<E>(o[x]);  // O as the forward stored it
        r.di[li] = float(di);
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int x = 0; x < D; ++x) s += dO(b, i, h, x) * V(b, j, hk, x);
          dp[j] = s;
        }
        for (int base = 0; base < 2; ++base) {
          auto& gq = base ? r.bq : r.tq;
          auto& gk = base ? r.bk : r.tk;
          auto& gv = base ? r.bv : r.tv;
          for (int j = 0; j <= last; ++j) {
            const double pj = base ? rnd<E>(p[j]) : p[j];
            const double ds = base ? rnd<E>(p[j] * (dp[j] - r.di[li])) : p[j] * (dp[j] - di);
            for (int x = 0; x < D; ++x) {
              gq[((size_t(b) * Nq + i) * Hq + h) * D + x] += scale * ds * K(b, j, hk, x);
              gk[((size_t(b) * Nk + j) * Hkv + hk) * D + x] += scale * ds * Q(b, i, h, x);
              gv[((size_t(b) * Nk + j) * Hkv + hk) * D + x] += pj * dO(b, i, h, x);
            }
          }
        }
      }
    }
  for (auto* x : {&r.bq, &r.bk, &r.bv})
    for (auto& e : *x) e = rnd<E>(e);
  return r;
}

template <class E>
struct DevRun {
  E *q, *k, *v, *dout, *dk, *dv;
  float *lse, *di, *lse2, *dip, *acc;
  int* order;
  int rows;
  BwdArgs a;
};

template <class E>
static DevRun<E> upload(const Problem& pr, const E* q, const E* k, const E* v, const E* dout, const float* lse, const float* di) {
  DevRun<E> d{};
  const size_t nqe = size_t(pr.b) * pr.nq * pr.hq * pr.d, nke = size_t(pr.b) * pr.nk * pr.hkv * pr.d, nl = size_t(pr.b) * pr.hq * pr.nq;
  d.rows = (pr.nq + 63) / 64 * 64;
  CK(cudaMalloc(&d.q, nqe * 2));
  CK(cudaMalloc(&d.dout, nqe * 2));
  CK(cudaMalloc(&d.k, nke * 2));
  CK(cudaMalloc(&d.v, nke * 2));
  CK(cudaMalloc(&d.dk, nke * 2));
  CK(cudaMalloc(&d.dv, nke * 2));
  CK(cudaMalloc(&d.lse, nl * 4));
  CK(cudaMalloc(&d.di, nl * 4));
  const size_t np = size_t(pr.b) * pr.hq * d.rows;  // v4+: padded, as the pre kernel writes them
  CK(cudaMalloc(&d.lse2, np * 4));
  CK(cudaMalloc(&d.dip, np * 4));
  CK(cudaMalloc(&d.acc, size_t(pr.b) * pr.hq * d.rows * pr.d * 4));
  CK(cudaMalloc(&d.order, size_t(pr.b) * pr.hq * (d.rows / 64) * 4));
  if (q) {
    CK(cudaMemcpy(d.q, q, nqe * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dout, dout, nqe * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.k, k, nke * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.v, v, nke * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.lse, lse, nl * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.di, di, nl * 4, cudaMemcpyHostToDevice));
    std::vector<float> l2(np, INFINITY), dp(np, 0.f);
    for (size_t bh = 0; bh < size_t(pr.b) * pr.hq; ++bh)
      for (int i = 0; i < pr.nq; ++i) {
        const float l = lse[bh * pr.nq + i];
        l2[bh * d.rows + i] = l == -INFINITY ? INFINITY : l * kLog2e;
        dp[bh * d.rows + i] = di[bh * pr.nq + i];
      }
    CK(cudaMemcpy(d.lse2, l2.data(), np * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dip, dp.data(), np * 4, cudaMemcpyHostToDevice));
  } else {  // bench: any finite values
    CK(cudaMemset(d.q, 0, nqe * 2));
    CK(cudaMemset(d.dout, 0, nqe * 2));
    CK(cudaMemset(d.k, 0, nke * 2));
    CK(cudaMemset(d.v, 0, nke * 2));
    CK(cudaMemset(d.lse, 0, nl * 4));
    CK(cudaMemset(d.di, 0, nl * 4));
    CK(cudaMemset(d.lse2, 0, np * 4));
    CK(cudaMemset(d.dip, 0, np * 4));
  }
  CK(cudaMemset(d.dk, 0xff, nke * 2));  // NaN poison: every key's row must be written
  CK(cudaMemset(d.dv, 0xff, nke * 2));
  BwdArgs& a = d.a;
  make_map<E>(a.q_map, d.q, pr.b, pr.nq, pr.hq, pr.d, 64);
  make_map<E>(a.do_map, d.dout, pr.b, pr.nq, pr.hq, pr.d, 64);
  make_map<E>(a.k_map, d.k, pr.b, pr.nk, pr.hkv, pr.d, 128);
  make_map<E>(a.v_map, d.v, pr.b, pr.nk, pr.hkv, pr.d, 128);
  a.lse = d.lse, a.di = d.di, a.lse2 = d.lse2, a.dip = d.dip, a.dq_accum = d.acc, a.dq_order = d.order, a.dk = d.dk, a.dv = d.dv;
  a.b = pr.b, a.nq = pr.nq, a.nk = pr.nk, a.hq = pr.hq, a.hkv = pr.hkv, a.rows = d.rows;
  a.scale = float(1.0 / std::sqrt(double(pr.d))), a.scale_log2 = a.scale * kLog2e;
  return d;
}

template <class E>
static void release(DevRun<E>& d) {
  for (void* p : {(void*)d.q, (void*)d.k, (void*)d.v, (void*)d.dout, (void*)d.dk, (void*)d.dv, (void*)d.lse, (void*)d.di, (void*)d.lse2, (void*)d.dip, (void*)d.acc,
                  (void*)d.order})
    CK(cudaFree(p));
}

template <class E, int D, bool C, int V>
static void launch_as(const Problem& pr, DevRun<E>& d, cudaStream_t s) {
  using T = Tile<D>;
  auto* fn = bwd_kernel<T, C, E, V>;
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmem));
  CK(cudaMemsetAsync(d.acc, 0, size_t(pr.b) * pr.hq * d.rows * pr.d * 4, s));
  if (V == 3 || V == 5) CK(cudaMemsetAsync(d.order, 0, size_t(pr.b) * pr.hq * (d.rows / 64) * 4, s));
  fn<<<dim3((pr.nk + T::kBn - 1) / T::kBn, pr.b * pr.hkv), T::kThreads, T::kSmem, s>>>(d.a);
  CK(cudaGetLastError());
}
template <class E, int V>
static void launch(const Problem& pr, DevRun<E>& d, cudaStream_t s = 0) {
  if (pr.d == 64) pr.causal ? launch_as<E, 64, true, V>(pr, d, s) : launch_as<E, 64, false, V>(pr, d, s);
  else pr.causal ? launch_as<E, 128, true, V>(pr, d, s) : launch_as<E, 128, false, V>(pr, d, s);
}

// Max |x - truth| over a gradient, and 4 unit roundoffs of E of its largest |truth|.
static void errs(const std::vector<double>& got, const std::vector<double>& truth, double& err, double& tmax) {
  err = tmax = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - truth[i]));
    tmax = std::max(tmax, std::fabs(truth[i]));
  }
}

// Element (r, x) of a 64-row block of the dQ accumulator: row-major (v1), or
// v2's fragment order (by columns at D128: a 64 x 64 block per consumer).
template <int V>
static int acc_index(int r, int x, int d) {
  if (V < 2) return r * d + x;
  if (d == 128) return x / 64 * 64 * 64 + dq_frag(r, x % 64, 64);
  return dq_frag(r, x, d);
}

template <class E, int V>
static bool check_one(const Problem& pr, uint32_t seed) {
  Run<E> r = reference<E>(pr, seed);
  DevRun<E> d = upload<E>(pr, r.q.data(), r.k.data(), r.v.data(), r.dout.data(), r.lse.data(), r.di.data());
  launch<E, V>(pr, d);
  CK(cudaDeviceSynchronize());
  std::vector<E> hk(r.k.size()), hv(r.k.size());
  std::vector<float> acc(size_t(pr.b) * pr.hq * d.rows * pr.d);
  CK(cudaMemcpy(hk.data(), d.dk, hk.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hv.data(), d.dv, hv.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(acc.data(), d.acc, acc.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> gq(r.q.size()), gk(hk.size()), gv(hv.size());
  for (size_t i = 0; i < gk.size(); ++i) gk[i] = to_f<E>(hk[i]), gv[i] = to_f<E>(hv[i]);
  for (int b = 0; b < pr.b; ++b)
    for (int i = 0; i < pr.nq; ++i)
      for (int h = 0; h < pr.hq; ++h)
        for (int x = 0; x < pr.d; ++x)  // the convert kernel's work: scale, round to E
          gq[((size_t(b) * pr.nq + i) * pr.hq + h) * pr.d + x] =
              rnd<E>(double(acc[((size_t(b) * pr.hq + h) * d.rows + i / 64 * 64) * pr.d + acc_index<V>(i % 64, x, pr.d)]) * d.a.scale);
  release(d);
  const double u = std::is_same<E, __nv_bfloat16>::value ? 1.0 / 256 : 1.0 / 2048;
  bool ok = true;
  char line[512];
  int n = std::snprintf(line, sizeof line, "v%d %s B%d Nq%d Nk%d H%d/%d D%d%s:", V, std::is_same<E, __half>::value ? "fp16" : "bf16", pr.b,
                        pr.nq, pr.nk, pr.hq, pr.hkv, pr.d, pr.causal ? " causal" : "");
  const char* names[3] = {"dQ", "dK", "dV"};
  const std::vector<double>* got[3] = {&gq, &gk, &gv};
  const std::vector<double>* tru[3] = {&r.tq, &r.tk, &r.tv};
  const std::vector<double>* bas[3] = {&r.bq, &r.bk, &r.bv};
  for (int o = 0; o < 3; ++o) {
    double eg, eb, tm;
    errs(*got[o], *tru[o], eg, tm);
    errs(*bas[o], *tru[o], eb, tm);
    const double bound = 2 * eb + 4 * u * tm;
    ok = ok && eg <= bound;
    n += std::snprintf(line + n, sizeof line - n, " %s %.2e (bound %.2e)", names[o], eg, bound);
  }
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", line);
  return ok;
}

static int check(int only) {  // only: 0 = every version, else that one
  const Problem ps[] = {
      {1, 1, 1, 1, 1, 64, false},      {1, 17, 17, 2, 1, 64, true},     {1, 97, 97, 2, 2, 128, false},
      {2, 130, 257, 4, 2, 64, true},   {1, 257, 130, 4, 1, 128, true},  {1, 300, 300, 4, 4, 128, true},
      {2, 200, 333, 8, 2, 128, false}, {1, 1025, 1025, 2, 1, 64, true}, {1, 513, 700, 2, 2, 128, false},
  };
  int fails = 0;
  uint32_t seed = 1;
  for (const auto& p : ps) {
    if (only == 0 || only == 1) fails += !check_one<__half, 1>(p, seed);
    if (only == 0 || only == 2) fails += !check_one<__half, 2>(p, seed);
    if (only == 0 || only == 3) fails += !check_one<__half, 3>(p, seed);
    if (only == 0 || only == 4) fails += !check_one<__half, 4>(p, seed);
    if (only == 0 || only == 5) fails += !check_one<__half, 5>(p, seed);
    ++seed;
    if (only == 0 || only == 1) fails += !check_one<__nv_bfloat16, 1>(p, seed);
    if (only == 0 || only == 2) fails += !check_one<__nv_bfloat16, 2>(p, seed);
    if (only == 0 || only == 3) fails += !check_one<__nv_bfloat16, 3>(p, seed);
    if (only == 0 || only == 4) fails += !check_one<__nv_bfloat16, 4>(p, seed);
    if (only == 0 || only == 5) fails += !check_one<__nv_bfloat16, 5>(p, seed);
    ++seed;
  }
  if (only != 0 && only != 3 && only != 5) {  // no deterministic version asked for
    std::printf(fails ? "CHECK FAILED (%d)\n" : "all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  // v3 and v5 are deterministic: the same dQ accumulator, bit for bit, over
  // 5 runs, on problems of many CTA waves (cheap inputs: N(0,1), LSE = ln Nk
  // + 4 so that P stays small, Di ~ N(0,1); no float64 forward). v2 (v4),
  // whose order is the hardware's, is printed beside it as a control.
  for (int det : {3, 5}) {
  if (only != 0 && only != det) continue;
  for (const Problem& p : {Problem{2, 4096, 4096, 16, 16, 128, true}, Problem{2, 4096, 4096, 16, 16, 128, false},
                           Problem{4, 2000, 3000, 16, 4, 64, true}, Problem{2, 3000, 2000, 8, 8, 64, false}}) {
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t nqe = size_t(p.b) * p.nq * p.hq * p.d, nke = size_t(p.b) * p.nk * p.hkv * p.d, nl = size_t(p.b) * p.hq * p.nq;
    std::vector<__half> q(nqe), k(nke), v(nke), dout(nqe);
    for (auto* x : {&q, &k, &v, &dout})
      for (auto& e : *x) e = __float2half_rn(nd(gen));
    std::vector<float> lse(nl, std::log(float(p.nk)) + 4.f), di(nl);
    for (auto& e : di) e = nd(gen);
    DevRun<__half> d = upload<__half>(p, q.data(), k.data(), v.data(), dout.data(), lse.data(), di.data());
    bool same[2] = {true, true};
    for (int ver = 0; ver < 2; ++ver) {
      std::vector<float> first, acc(size_t(p.b) * p.hq * d.rows * p.d);
      for (int rep = 0; rep < 5; ++rep) {
        if (det == 3) ver == 0 ? launch<__half, 3>(p, d) : launch<__half, 2>(p, d);
        else ver == 0 ? launch<__half, 5>(p, d) : launch<__half, 4>(p, d);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(acc.data(), d.acc, acc.size() * 4, cudaMemcpyDeviceToHost));
        if (rep == 0) first = acc;
        else same[ver] = same[ver] && std::memcmp(first.data(), acc.data(), acc.size() * 4) == 0;
      }
    }
    release(d);
    std::printf("%s v%d deterministic: dQ accumulator identical over 5 runs (B%d Nq%d Nk%d H%d/%d D%d%s; v%d: %s)\n", same[0] ? "ok  " : "FAIL",
                det, p.b, p.nq, p.nk, p.hq, p.hkv, p.d, p.causal ? " causal" : "", det - 1, same[1] ? "identical too" : "differs, as expected");
    fails += !same[0];
  }
  }
  std::printf(fails ? "CHECK FAILED (%d)\n" : "all checks passed\n", fails);
  return fails ? 1 : 0;
}

template <class E, int V>
static void bench_dtype(const char* name) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (int n : {1024, 2048, 4096, 8192, 16384}) {
        const Problem pr{16384 / n, n, n, 2048 / d, 2048 / d, d, causal};
        DevRun<E> dr = upload<E>(pr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
        std::vector<float> ms;
        for (int it = 0; it < 25; ++it) {
          CK(cudaEventRecord(e0));
          launch<E, V>(pr, dr);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float t;
          CK(cudaEventElapsedTime(&t, e0, e1));
          if (it >= 5) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        const double flops = 2.5 * 4.0 * pr.b * pr.hq * double(n) * n * d / (causal ? 2 : 1);
        std::printf("bench v%d %s D%d %s N%5d: %.3f ms %6.1f TFLOP/s (dQ accumulator zeroing included; pre and convert not)\n", V, name, d,
                    causal ? "causal" : "plain ", n, med, flops / med / 1e9);
        release(dr);
      }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  const int only = argc > 2 ? std::atoi(argv[2]) : 0;  // one version (1-3), so that a fault names it
  if (mode == "check") return check(only);
  if (mode == "bench") {
    if (only == 0 || only == 1) bench_dtype<__half, 1>("fp16");
    if (only == 0 || only == 2) bench_dtype<__half, 2>("fp16");
    if (only == 0 || only == 3) bench_dtype<__half, 3>("fp16");
    if (only == 0 || only == 4) bench_dtype<__half, 4>("fp16");
    if (only == 0 || only == 5) bench_dtype<__half, 5>("fp16");
    if (only == 0 || only == 4) bench_dtype<__nv_bfloat16, 4>("bf16");
    return 0;
  }
  std::fprintf(stderr, "usage: bwd_sm90 check|bench [version]\n");
  return 2;
}
