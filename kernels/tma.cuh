// tma.cuh: the sm_90a pieces that move data for the Hopper kernels
// (fwd_sm90.cuh, bwd_sm90.cuh): mbarriers, TMA bulk tensor loads completing on them, and
// named barriers. Compile for sm_90a only.
//
// An mbarrier counts arrivals and, with expect_tx, bytes: a phase completes
// when both reach zero; waiters name the parity of the phase they wait for
// (use u of a barrier is phase u, parity u & 1).
#pragma once
#include <cstdint>

namespace sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
// The inits visible to the async proxy (TMA) and, after a __syncthreads, to every thread.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival that also expects `bytes` of TMA transfers in this phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
// Until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(smem_u32(b)),
      "r"(parity)
      : "memory");
}
// One box of a 4-d tensor map (in parameter space) at coordinates (c0..c3),
// into shared memory at dst; its bytes complete on mbarrier bar.
__device__ __forceinline__ void tma_load(void* dst, const void* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

// A store ptxas keeps before a later wgmma.wait_group (it moves ALU work past
// the wait, not memory operations): storing x pins the computation of x
// ahead of the wait.
__device__ __forceinline__ void pin_before_wait(float* slot, float x) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(smem_u32(slot)), "f"(x) : "memory");
}

// The consumers' turns (fwd_sm90.cuh's ping-pong): named barrier 1 + c is
// consumer c's (barrier 0 is __syncthreads'), 256 threads: its own 128 wait
// there for the 128 arrivals of the warpgroup before it. The ids come from
// %tid.x in the asm so no register holds them across the main loop.
__device__ __forceinline__ void turn_wait() {
  asm volatile("{\n.reg .u32 id;\nmov.u32 id, %tid.x;\nshr.u32 id, id, 7;\nbar.sync id, 256;\n}\n" ::: "memory");
}
template <int kConsumers>
__device__ __forceinline__ void turn_pass() {
  asm volatile(
      "{\n.reg .u32 id;\nmov.u32 id, %%tid.x;\nshr.u32 id, id, 7;\nrem.u32 id, id, %0;\nadd.u32 id, id, 1;\n"
      "bar.arrive id, 256;\n}\n" ::"n"(kConsumers)
      : "memory");
}
// The producer warpgroup's 128 arrivals that give consumer 0 the first turn.
__device__ __forceinline__ void turn_first() { asm volatile("bar.arrive 1, 256;\n" ::: "memory"); }

// Consumer c's own 128 threads: named barrier 1 + kConsumers + c, after the
// turns' ids.
template <int kConsumers>
__device__ __forceinline__ void consumer_sync(int c) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + kConsumers + c) : "memory");
}

// Register budget of a warpgroup after warp specialisation (immediate operand).
template <int kRegs>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
}
template <int kRegs>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs) : "memory");
}

}  // namespace sm90
