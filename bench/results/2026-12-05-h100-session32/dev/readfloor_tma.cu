// Session 32 dev: session 20's bare-read floor (readfloor.cu: 16-byte loads into registers) asked
// again with the Hopper bulk copy engine: each CTA streams one contiguous share of a decode call's
// K and V bytes into a ring of `stages` shared-memory chunks by cp.async.bulk (one thread issues,
// an mbarrier per stage counts the bytes in), touching one word of each chunk, no math.
// Is 80% of 4.8 TB/s at B 1, 32k-64k entries within any read? Built on the device:
//   nvcc -O3 -arch=sm_90 -cubin -o readfloor_tma.cubin readfloor_tma.cu
#include <cstdint>

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// chunk: bytes per bulk copy (a multiple of 16); stages: chunks in flight per CTA.
extern "C" __global__ void read_bulk(const char* __restrict__ p, long long nbytes, long long share, int chunk,
                                     int stages, unsigned* out) {
  extern __shared__ __align__(128) char ring[];
  __shared__ __align__(8) uint64_t bar[16];
  if (threadIdx.x != 0) return;  // one thread issues every copy and waits for each
  const long long begin = blockIdx.x * share, end = begin + share < nbytes ? begin + share : nbytes;
  if (begin >= end) return;
  const int chunks = static_cast<int>((end - begin + chunk - 1) / chunk);
  for (int s = 0; s < stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto issue = [&](int c) {
    const int s = c % stages;
    const long long off = begin + static_cast<long long>(c) * chunk;
    const unsigned bytes = static_cast<unsigned>(end - off < chunk ? end - off : chunk);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar[s])), "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            smem_u32(ring + s * chunk)),
        "l"(p + off), "r"(bytes), "r"(smem_u32(&bar[s]))
        : "memory");
  };
  for (int c = 0; c < stages && c < chunks; ++c) issue(c);
  unsigned acc = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % stages;
    const unsigned parity = (c / stages) & 1;
    asm volatile(
        "{\n .reg .pred done;\n wait:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra wait;\n}" ::"r"(smem_u32(&bar[s])),
        "r"(parity)
        : "memory");
    acc ^= *reinterpret_cast<const unsigned*>(ring + s * chunk);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the read above before the next write
    if (c + stages < chunks) issue(c + stages);
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // keeps the copies; never true for the test data
}
