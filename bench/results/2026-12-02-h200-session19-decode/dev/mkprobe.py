"""Session 19 dev probe: decode.cuh with %globaltimer stamps (thread 0 of each CTA) at 9 points.
usage: mkprobe.py SRC_KERNELS_DIR DST_KERNELS_DIR"""
import shutil, sys
src, dst = sys.argv[1:3]
shutil.copytree(src, dst, dirs_exist_ok=True)
s = open(src + "/decode.cuh").read()
def rep(old, new):
    global s
    assert s.count(old) == 1, old[:70]
    s = s.replace(old, new)
rep("namespace fa2 {\n", '''namespace fa2 {

__device__ unsigned long long fa2_probe[8192 * 10];
__device__ __forceinline__ void probe(int i) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    fa2_probe[cta * 10 + i] = t;
  }
}
''')
rep("  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n  const int g = lane >> 2, t = lane & 3;\n  const int b = blockIdx.y",
    "  probe(0);\n  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n  const int g = lane >> 2, t = lane & 3;\n  const int b = blockIdx.y")
rep("    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);\n", "    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);\n    probe(1);\n")
rep("      __syncthreads();  // block n landed; every warp is done with block n-1's buffer\n",
    "      __syncthreads();  // block n landed; every warp is done with block n-1's buffer\n      if (n == n_begin) probe(2);\n")
rep("    cp_async_wait<0>();\n  } else {", "    cp_async_wait<0>();\n    probe(3);\n  } else {")
rep("  if (splits > 1) decode_merge_splits<T, E>(p, b, hk, row0, live_rows);\n",
    "  probe(4);\n  if (splits > 1) decode_merge_splits<T, E>(p, b, hk, row0, live_rows);\n  probe(8);\n")
rep("  if (!decode_last_in(cnt + run, min(kMergeFan, splits - s0))) return;\n",
    "  if (!decode_last_in(cnt + run, min(kMergeFan, splits - s0))) return;\n  probe(5);\n")
rep("  decode_merge<T, E>(p, b, hk, row0, rows, s0, min(kMergeFan, splits - s0), 1, s0);\n  if (!decode_last_in(cnt + runs, runs)) return;\n",
    "  decode_merge<T, E>(p, b, hk, row0, rows, s0, min(kMergeFan, splits - s0), 1, s0);\n  probe(6);\n  if (!decode_last_in(cnt + runs, runs)) return;\n  probe(7);\n")
open(dst + "/decode.cuh", "w").write(s)
