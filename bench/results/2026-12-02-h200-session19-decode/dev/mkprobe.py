"""Session 19 dev probe: decode.cuh (of bc09c3c + a variant's diff) with %globaltimer stamps (thread 0
of each CTA) at 9 points, with "fine" 6 more in the epilogue and the merge (call 5; calls 3-4 ran the
coarse build with 10 slots per CTA, the fine one has 16).
usage: mkprobe.py SRC_KERNELS_DIR DST_KERNELS_DIR [fine]"""
import shutil, sys
src, dst = sys.argv[1:3]
fine = sys.argv[3:] == ["fine"]
slots = 16 if fine else 10
shutil.copytree(src, dst, dirs_exist_ok=True)
s = open(src + "/decode.cuh").read()
def rep(old, new):
    global s
    assert s.count(old) == 1, old[:70]
    s = s.replace(old, new)
rep("namespace fa2 {\n", '''namespace fa2 {

__device__ unsigned long long fa2_probe[8192 * SLOTS];
__device__ __forceinline__ void probe(int i) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    fa2_probe[cta * SLOTS + i] = t;
  }
}
'''.replace("SLOTS", str(slots)))
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
if fine:
    rep("  sm.finish(o, unit, lse);\n", "  sm.finish(o, unit, lse);\n  probe(9);\n")
    rep("      if (pass == 0 && t == 0) sL[warp * R + row] = lse[0][hh];\n    }\n    __syncthreads();\n",
        "      if (pass == 0 && t == 0) sL[warp * R + row] = lse[0][hh];\n    }\n    __syncthreads();\n    probe(10);\n")
    rep("    __syncthreads();  // sX of the last round (or the verdict word) is read\n",
        "    __syncthreads();  // sX of the last round (or the verdict word) is read\n    probe(11);\n")
    rep("    if (parts > 1) {\n      float* sx", "    probe(12);\n    if (parts > 1) {\n      float* sx")
    rep("    if (tid < items && base + tid < items) {\n      const float inv = mg.inv();",
        "    probe(13);\n    if (tid < items && base + tid < items) {\n      const float inv = mg.inv();")
    rep("  __syncthreads();  // every LSE of slot `out` is read\n", "  probe(14);\n  __syncthreads();  // every LSE of slot `out` is read\n")
open(dst + "/decode.cuh", "w").write(s)
