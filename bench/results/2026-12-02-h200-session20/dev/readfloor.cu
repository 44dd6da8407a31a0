// Session 20 dev: the floor of reading a decode call's K and V once with a cold L2 -- a kernel that
// only streams the bytes (16-byte loads, U in flight per thread, no math), each CTA one contiguous
// share as a split reads its range. Built on the device: nvcc -O3 -arch=sm_90 -cubin readfloor.cu
#include <cstdint>
template <int U>
__device__ void stream(const uint4* __restrict__ p, long long n16, long long share, unsigned* out) {
  const long long begin = blockIdx.x * share, end = min(begin + share, n16);
  unsigned acc = 0;
  for (long long i = begin + threadIdx.x; i < end; i += (long long)U * blockDim.x) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = i + (long long)u * blockDim.x;
      r[u] = j < end ? __ldcs(p + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // keeps the loads; never true for the test data
}
extern "C" __global__ void read4(const uint4* p, long long n16, long long share, unsigned* out) { stream<4>(p, n16, share, out); }
extern "C" __global__ void read8(const uint4* p, long long n16, long long share, unsigned* out) { stream<8>(p, n16, share, out); }
extern "C" __global__ void read16(const uint4* p, long long n16, long long share, unsigned* out) { stream<16>(p, n16, share, out); }
