// wgmma.cuh: the sm_90a tensor-core pieces of the Hopper kernels (fwd_sm90.cuh, bwd_sm90.cuh;
// checked alone by dev/wgmma_check.cu): the 128-byte swizzled
// shared-memory layout, the wgmma matrix descriptor, the wgmma shapes of an FA2
// step (N 64 or 128: Bc for S, D for O) and the fences.
// Compile for sm_90a only (wgmma has no sm_90 or PTX-JIT form).
//
// Layout (16-bit elements, fp16 or bf16; a "row" is 128 bytes = 64 elements, 8 rows = one 1024-byte
// swizzle atom; 16-byte chunk c of row r is stored at chunk c ^ (r % 8)):
//   K-major operands (Q, K; rows are M or N, columns the reduction dim):
//     element (row, c) in column block c / 64 (kRows x 128 B each); a k16
//     step advances the start address by 32 B, a block by kRows * 128 B.
//   N-major operand (V; rows are keys = the reduction dim): the same formula
//     with row = key; a k16 step advances the start by 16 rows = 2 KiB.
// Descriptor: start >> 4 in bits 0-13, "leading" byte offset >> 4 in 16-29,
// "stride" byte offset >> 4 in 32-45, swizzle mode in 62-63 (1 = 128 B).
// Checked on the H200 (dev/wgmma_check.cu): K-major: stride = 1 KiB,
// leading ignored; N-major: leading = the column block stride, stride = 1 KiB.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace sm90 {

// Byte offset of element (r, c) of a kRows-row tile in the swizzled layout.
template <int kRows>
__host__ __device__ inline int swz(int r, int c) {
  const int b = (c % 64) * 2;
  return (c / 64) * kRows * 128 + r * 128 + (((b / 16) ^ (r % 8)) * 16) + b % 16;
}

__device__ inline uint64_t desc(const void* p, uint32_t lead, uint32_t stride) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t((lead >> 4) & 0x3FFF) << 16) |
         (uint64_t((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// An operand without swizzle, in 8x8 core matrices (8 rows of 16 bytes, 128
// contiguous bytes): for an N-major B, "leading" is the byte step between
// core matrices along K, "stride" the step along N (CUTLASS's interleaved
// MN-major layout).
__device__ inline uint64_t desc_il(const void* p, uint32_t lead, uint32_t stride) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t((lead >> 4) & 0x3FFF) << 16) | (uint64_t((stride >> 4) & 0x3FFF) << 32);
}

// The wgmma wrappers take the element type E of their A and B operands:
// __half (.f16) or __nv_bfloat16 (.bf16), both accumulating in fp32 with the
// same fragment and shared-memory layouts, so the bf16 kernels differ from
// the fp16 ones only in the instruction and the packing (as mma.cuh's).
// SM90_WGMMA(E, TY_ASM) expands TY_ASM("f16") or TY_ASM("bf16") by E.
#define SM90_WGMMA(E, TY_ASM)                              \
  if constexpr (std::is_same<E, __nv_bfloat16>::value) { \
    TY_ASM("bf16");                                       \
  } else {                                                \
    static_assert(std::is_same<E, __half>::value, "E: __half or __nv_bfloat16"); \
    TY_ASM("f16");                                        \
  }
// The accumulator registers of an m64nN wgmma (N/2 floats per thread) in its
// operand list, and their "{%0, ..., %N/2-1}" in the instruction.
#define SM90_ACC32(K)                                                                                      \
  K(d[0]), K(d[1]), K(d[2]), K(d[3]), K(d[4]), K(d[5]), K(d[6]), K(d[7]), K(d[8]), K(d[9]), K(d[10]),      \
      K(d[11]), K(d[12]), K(d[13]), K(d[14]), K(d[15]), K(d[16]), K(d[17]), K(d[18]), K(d[19]), K(d[20]),  \
      K(d[21]), K(d[22]), K(d[23]), K(d[24]), K(d[25]), K(d[26]), K(d[27]), K(d[28]), K(d[29]), K(d[30]),  \
      K(d[31])
#define SM90_ACC40(K)                                                                                      \
  SM90_ACC32(K), K(d[32]), K(d[33]), K(d[34]), K(d[35]), K(d[36]), K(d[37]), K(d[38]), K(d[39])
#define SM90_ACC64(K)                                                                                      \
  SM90_ACC32(K), K(d[32]), K(d[33]), K(d[34]), K(d[35]), K(d[36]), K(d[37]), K(d[38]), K(d[39]), K(d[40]), \
      K(d[41]), K(d[42]), K(d[43]), K(d[44]), K(d[45]), K(d[46]), K(d[47]), K(d[48]), K(d[49]), K(d[50]),  \
      K(d[51]), K(d[52]), K(d[53]), K(d[54]), K(d[55]), K(d[56]), K(d[57]), K(d[58]), K(d[59]), K(d[60]),  \
      K(d[61]), K(d[62]), K(d[63])
#define SM90_R32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SM90_R40 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define SM90_R64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// S (64x64, fp32 in d) = Q (64x16 slice, smem desc a) . K^T (desc b); scale_d 0 overwrites d.
template <class E>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
#define SM90_ASM(TY)                                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " SM90_R32 ", %32, %33, p, 1, 1, 0, 0;\n}\n" \
               : SM90_ACC32("+f")                                                                           \
               : "l"(a), "l"(b), "r"(scale_d))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}

// The backward's S^T and dP^T at Br 80 (64 keys x 80 queries): as above.
template <class E>
__device__ __forceinline__ void wgmma_m64n80k16_ss(float (&d)[40], uint64_t a, uint64_t b, int scale_d) {
#define SM90_ASM(TY)                                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n80k16.f32." TY "." TY " " SM90_R40 ", %40, %41, p, 1, 1, 0, 0;\n}\n" \
               : SM90_ACC40("+f")                                                                           \
               : "l"(a), "l"(b), "r"(scale_d))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}

// O (64x128, fp32 in d) += P (64x16, 16-bit pairs in registers a) . V (16x128, smem desc b, N-major: trans-b 1).
template <class E>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
#define SM90_ASM(TY)                                                                                     \
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " SM90_R64                     \
               ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"                                              \
               : SM90_ACC64("+f")                                                                       \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}

// O (64x64, fp32 in d) += P (64x16, 16-bit pairs in registers a) . V (16x64, smem desc b, N-major: trans-b 1).
template <class E>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
#define SM90_ASM(TY)                                                                                     \
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " SM90_R32                      \
               ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"                                              \
               : SM90_ACC32("+f")                                                                       \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}

// S (64x128, fp32 in d) = Q (64x16 slice, smem desc a) . K^T (128 keys, desc b); scale_d 0 overwrites d.
template <class E>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
#define SM90_ASM(TY)                                                                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                   \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " SM90_R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n" \
               : SM90_ACC64("+f")                                                                            \
               : "l"(a), "l"(b), "r"(scale_d))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}

// The same with d write-only (scale_d 0): d's old values are not inputs, so
// its registers are free up to the issue (fwd_sm90.cuh's kSInit).
template <class E>
__device__ __forceinline__ void wgmma_m64n128k16_ss_init(float (&d)[64], uint64_t a, uint64_t b) {
#define SM90_ASM(TY)                                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"                                                    \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " SM90_R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n" \
               : SM90_ACC64("=f")                                                                           \
               : "l"(a), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}
// dQ's GEMM (bwd_sm90.cuh): d (64 x N) += A (64 x 16 in shared memory,
// M-major: trans-a 1) . B (16 x N in shared memory, N-major: trans-b 1).
template <class E>
__device__ __forceinline__ void wgmma_m64n128k16_tt(float (&d)[64], uint64_t a, uint64_t b) {
#define SM90_ASM(TY)                                                                                                 \
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " SM90_R64 ", %64, %65, 1, 1, 1, 1, 1;\n" \
               : SM90_ACC64("+f")                                                                                   \
               : "l"(a), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}
template <class E>
__device__ __forceinline__ void wgmma_m64n64k16_tt(float (&d)[32], uint64_t a, uint64_t b) {
#define SM90_ASM(TY)                                                                                                \
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " SM90_R32 ", %32, %33, 1, 1, 1, 1, 1;\n" \
               : SM90_ACC32("+f")                                                                                  \
               : "l"(a), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}
// dQ_m^T's GEMM at Br 80 (64 columns x 80 queries): A M-major, B N-major.
template <class E>
__device__ __forceinline__ void wgmma_m64n80k16_tt(float (&d)[40], uint64_t a, uint64_t b) {
#define SM90_ASM(TY)                                                                                                \
  asm volatile("wgmma.mma_async.sync.aligned.m64n80k16.f32." TY "." TY " " SM90_R40 ", %40, %41, 1, 1, 1, 1, 1;\n" \
               : SM90_ACC40("+f")                                                                                  \
               : "l"(a), "l"(b))
  SM90_WGMMA(E, SM90_ASM)
#undef SM90_ASM
}
#undef SM90_WGMMA
#undef SM90_ACC32
#undef SM90_ACC40
#undef SM90_ACC64
#undef SM90_R32
#undef SM90_R40
#undef SM90_R64

// By accumulator size (N = 2 x its floats): d (64xN) [+]= A . B, both from
// shared memory (ss; tt: A M-major, B N-major) or A from registers and B
// N-major (rs).
template <class E>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
  wgmma_m64n128k16_ss<E>(d, a, b, scale_d);
}
template <class E>
__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  wgmma_m64n64k16_ss<E>(d, a, b, scale_d);
}
template <class E>
__device__ __forceinline__ void wgmma_ss(float (&d)[40], uint64_t a, uint64_t b, int scale_d) {
  wgmma_m64n80k16_ss<E>(d, a, b, scale_d);
}
template <class E>
__device__ __forceinline__ void wgmma_ss_init(float (&d)[64], uint64_t a, uint64_t b) {
  wgmma_m64n128k16_ss_init<E>(d, a, b);
}
template <class E>
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  wgmma_m64n128k16_rs<E>(d, a, b);
}
template <class E>
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  wgmma_m64n64k16_rs<E>(d, a, b);
}
template <class E>
__device__ __forceinline__ void wgmma_tt(float (&d)[64], uint64_t a, uint64_t b) {
  wgmma_m64n128k16_tt<E>(d, a, b);
}
template <class E>
__device__ __forceinline__ void wgmma_tt(float (&d)[32], uint64_t a, uint64_t b) {
  wgmma_m64n64k16_tt<E>(d, a, b);
}
template <class E>
__device__ __forceinline__ void wgmma_tt(float (&d)[40], uint64_t a, uint64_t b) {
  wgmma_m64n80k16_tt<E>(d, a, b);
}

// lo, hi rounded to nearest (even) in E and packed as a wgmma A register.
template <class E>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Before the first wgmma of a batch whose registers (accumulators, A) other
// instructions wrote; commit + wait 0 closes the batch.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_wait() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Split commit and wait, for batches left in flight under other work (the
// warp-specialised forward): wait<N> returns once at most N groups are pending.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Pins registers (accumulators, A fragments) at this point of the program, so
// that the compiler neither moves nor reuses them while a wgmma using them is in
// flight: ptxas would otherwise wait for the wgmma early to free them.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
// Shared-memory stores of this thread (st.shared or cp.async) made visible to
// the async proxy that wgmma reads through; then a barrier for the others'.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace sm90
