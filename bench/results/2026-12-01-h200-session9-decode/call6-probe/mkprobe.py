import sys, re
# usage: mkprobe.py SRC_DECODE_CUH SRC_PARAMS DST_DIR variant(base|ul|ulq)
src, par, dst, var = sys.argv[1:5]
s = open(src).read()
p = open(par).read()
s = s.replace("namespace fa2 {\n", '''namespace fa2 {

// Dev probe (session 9): thread 0 of each CTA stamps %globaltimer at 8 points.
__device__ unsigned long long fa2_probe[8192 * 8];
__device__ __forceinline__ void probe(int i) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    fa2_probe[cta * 8 + i] = t;
  }
}
''', 1)
def rep(old, new):
    global s
    assert old in s, old[:60]
    s = s.replace(old, new)
rep("""  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv;""", """  probe(0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int b = blockIdx.y / p.hkv, hk = blockIdx.y % p.hkv;""")
rep("""    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);
    int buf = 0;
    for (int n = n_begin; n < n_end; ++n) {
      cp_async_wait<S - 2>();
      __syncthreads();  // block n landed; every warp is done with block n-1's buffer""", """    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);
    probe(1);
    int buf = 0;
    for (int n = n_begin; n < n_end; ++n) {
      cp_async_wait<S - 2>();
      __syncthreads();  // block n landed; every warp is done with block n-1's buffer
      if (n == n_begin) probe(2);""")
rep("""      buf = buf == S - 1 ? 0 : buf + 1;
    }
    cp_async_wait<0>();
  } else {""", """      buf = buf == S - 1 ? 0 : buf + 1;
    }
    cp_async_wait<0>();
    probe(3);
  } else {""")
rep("""  if (splits > 1) decode_merge_splits<T, E>(p, b, hk, row0, live_rows);""", """  probe(4);
  if (splits > 1) decode_merge_splits<T, E>(p, b, hk, row0, live_rows);
  probe(7);""")
rep("""  if (!decode_last_in(cnt + run, min(kMergeFan, splits - s0))) return;
  if (runs == 1) {""", """  if (!decode_last_in(cnt + run, min(kMergeFan, splits - s0))) return;
  probe(5);
  if (runs == 1) {""")
rep("""  if (!decode_last_in(cnt + runs, runs)) return;""", """  if (!decode_last_in(cnt + runs, runs)) return;
  probe(6);""")
if var in ("ul", "ulq"):
    p = p.replace("""  float softcap;              // 0: none; then 4 bytes of padding, as in the Go struct
};""", """  float softcap;              // 0: none
  int32_t uniform_len;
};""")
    rep("const int len = p.seqlens[b],", "const int len = p.uniform_len >= 0 ? p.uniform_len : p.seqlens[b],")
if var == "ulq":
    # Q fragments after the first blocks are issued
    a = s.index("  // Q fragments straight from global")
    b = s.index("  const int32_t* table = p.block_table")
    qblock = s[a:b]
    s = s[:a] + "  uint32_t qf[1][KD][4];\n" + s[b:]
    qblock = qblock.replace("  uint32_t qf[1][KD][4];\n", "")
    rep("""    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);
    probe(1);""", """    for (int s = 0; s < S - 1; ++s) issue(n_begin + s, s);
    probe(1);
""" + qblock.replace("\n", "\n  "))
open(dst + "/decode.cuh", "w").write(s)
open(dst + "/params.cuh", "w").write(p)
