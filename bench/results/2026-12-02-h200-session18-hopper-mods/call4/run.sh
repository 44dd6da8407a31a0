#!/usr/bin/env bash
# Session 18, call 4: the dK/dV kernels' query-block range in one helper (mask.cuh's
# key_block_queries): of the shipped kernels only the D256 modified single pass
# (fa2_bwd_dkdvq_sm80_d256_large[_bf16]_mod) compiles differently (two volatile shared-memory
# loads of the packed sequence's lengths fewer). flashattn.test of that tree, fa2.fatbin reduced
# to its sm_90 image.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/s18; mkdir -p "$OUT" $B
xz -dc .build/s18.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn || exit 1
for run in 'TestGPUModifiedBackwardKernels' \
  'TestGPUConformanceBackward/(default|deterministic)/(alibi-softcap10-N130-D256|window-l100-causal-softcap30-Nq200-Nk333-gqa2-D256|varlen-.*d256.*)' \
  'TestGPUVarlenConformance/path0/varlen-d256.*' 'TestGPUVarlenBF16'; do
  echo "== $run"
  timeout 45 $B/flashattn.test -test.run "$run" -test.v -test.count=1 2>&1 | grep -E "^\s*--- (PASS|FAIL)|^(ok|PASS|FAIL|panic)"
done > "$OUT/tests.txt"
cat "$OUT/tests.txt"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUModifiedBackwardKernels' -test.count=1 >"$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.txt"
echo "all done $((SECONDS-t0))s"
