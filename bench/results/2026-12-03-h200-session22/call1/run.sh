#!/usr/bin/env bash
# Session 22, call 1 (carry .build/c1/b.tar.xz: flashattn.test of this commit's tree, its fa2.fatbin cut
# to the sm_90 image; the Turing kernels come from the tree's fa2_sm75.fatbin, which the binary embeds whole):
# the Turing D256 forward (fa2_fwd_sm75_d256*, n8.cuh's WarpN8, 8 rows per warp) through the Go GPU
# tests (the Hopper ones left out: untouched, and 250 s), then compute-sanitizer memcheck and racecheck
# of its forward-only conformance run (every suite case at D256 on the forced Turing path).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn
timeout 330 $B/flashattn.test -test.run 'GPU|Ladder|Table' -test.skip 'Hopper' -test.v -test.count=1 > "$OUT/go_tests.txt" 2>&1; echo "go rc=$? $((SECONDS-t0))s"
echo "PASS $(grep -cE '^\s*--- PASS' "$OUT/go_tests.txt") FAIL $(grep -cE '^\s*--- FAIL' "$OUT/go_tests.txt") SKIP $(grep -cE '^\s*--- SKIP' "$OUT/go_tests.txt")"
grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/go_tests.txt" | head -20
grep -E -- "--- (PASS|FAIL): TestGPU(ConformanceSM75|VarlenConformance|VarlenErrors|RawConformanceSM75) " "$OUT/go_tests.txt"
grep -E -- "--- (PASS|FAIL).*(D256|d256)" "$OUT/go_tests.txt" | grep -iE "sm75|path75|fwd-only" | head -12
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool $B/flashattn.test -test.run 'TestGPUConformanceSM75/fwd-only' -test.v -test.count=1 > "$OUT/san_$tool.txt" 2>&1
  echo "$tool rc=$? $((SECONDS-t0))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|PASS|FAIL)" "$OUT/san_$tool.txt" | head -3
done
