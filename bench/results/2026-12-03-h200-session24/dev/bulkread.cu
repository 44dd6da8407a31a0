// Session 24 dev: does the TMA's bulk copy (cp.async.bulk, sm_90) read a B 1 decode call's K and V
// faster than session 20's bare 16-byte loads (readfloor.cu)? One thread per CTA issues the CTA's
// contiguous share in `chunk`-byte copies into a ring of `stages` shared-memory buffers, each
// completing on its mbarrier; nothing reads the data (a bare read, as readfloor.cu's).
// Built on the device: nvcc -O3 -arch=sm_90a -cubin bulkread.cu
#include <cstdint>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(bar), "r"(parity)
      : "memory");
}

extern "C" __global__ void __launch_bounds__(32) bulkread(const char* __restrict__ src, long long nbytes, long long share, int chunk,
                                                           int stages, unsigned* out) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) unsigned long long bar[16];
  const long long begin = blockIdx.x * share, end = min(nbytes, begin + share);
  if (begin >= end || threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(&bar[s])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  const int n = static_cast<int>((end - begin + chunk - 1) / chunk);
  for (int i = 0; i < n; ++i) {
    const int s = i % stages;
    const uint32_t b = smem_u32(&bar[s]);
    if (i >= stages) wait_parity(b, (i / stages - 1) & 1);  // the buffer's previous copy landed
    const long long off = begin + static_cast<long long>(i) * chunk;
    const uint32_t bytes = static_cast<uint32_t>(min(static_cast<long long>(chunk), end - off));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_u32(ring + s * chunk)),
                 "l"(src + off), "r"(bytes), "r"(b)
                 : "memory");
  }
  for (int i = max(0, n - stages); i < n; ++i) wait_parity(smem_u32(&bar[i % stages]), (i / stages) & 1);
  if (ring[0] == 0xA5 && ring[1] == 0x5A && ring[2] == 0xA5) out[blockIdx.x] = 1;  // keeps the copies observable
}
