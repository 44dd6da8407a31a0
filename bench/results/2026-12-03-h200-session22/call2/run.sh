#!/usr/bin/env bash
# Session 22, call 2 (carry .build/c1/b.tar.xz: flashattn.test of this commit's tree, its fa2.fatbin cut
# to the sm_90 image; fa2_sm75.fatbin whole): call 1 found the suite's D256 cases few (4 plain, 2 packed),
# so TestGPUConformanceSM75's fwd-only run now also runs every suite case and every varlen case at D256
# (attntest.CasesAt / VarlenCasesAt: each of the eight fa2_fwd_sm75_d256* kernels several times);
# then compute-sanitizer memcheck and racecheck of that run.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn
timeout 200 $B/flashattn.test -test.run 'TestGPUConformanceSM75|TestKernelTable|TestGPUVarlenConformance|TestGPUVarlenErrors' -test.v -test.count=1 > "$OUT/go_tests.txt" 2>&1; echo "go rc=$? $((SECONDS-t0))s"
echo "PASS $(grep -cE '^\s*--- PASS' "$OUT/go_tests.txt") FAIL $(grep -cE '^\s*--- FAIL' "$OUT/go_tests.txt") SKIP $(grep -cE '^\s*--- SKIP' "$OUT/go_tests.txt") at-D256 $(grep -cE -- '--- PASS.*-at-D256' "$OUT/go_tests.txt")"
grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/go_tests.txt" | head -20
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool $B/flashattn.test -test.run 'TestGPUConformanceSM75/fwd-only' -test.count=1 > "$OUT/san_$tool.txt" 2>&1
  echo "$tool rc=$? $((SECONDS-t0))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|PASS|FAIL)" "$OUT/san_$tool.txt" | head -3
done
