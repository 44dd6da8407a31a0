#!/usr/bin/env bash
# Session 29, call 6 (carry .build/s29: b3.tar.xz): the tensor map encoder with its context current.
# cuda_old.test = the new test over the old encoder (the driver call on whatever thread); cuda.test = the fix;
# then the Hopper forward's tests on the fix.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c6
mkdir -p "$OUT" $B; xz -dc .build/s29/b3.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for g in cuda_old cuda; do
  (cd internal/cuda && timeout 60 $B/$g.test -test.run 'TensorMap' -test.v -test.count=3 2>&1) | tee "$OUT/$g.txt" | grep -E "^\s*--- |^(ok|FAIL|PASS)|context" | head -8
done
(cd internal/cuda && timeout 60 $B/cuda.test -test.v -test.count=1 2>&1) > "$OUT/cuda_all.txt"; echo "cuda all rc=$? pass $(grep -c -- '--- PASS' "$OUT/cuda_all.txt") fail $(grep -c -- '--- FAIL' "$OUT/cuda_all.txt")"
(cd flashattn && timeout 300 $B/flashattn.test -test.run 'TestGPUHopperForward$|TestGPUConformance$|TestGPURawConformance$|TestGPUHopperCubinFallback|TestGPUConcurrentForward|TestGPUTwoDevices' -test.v -test.count=1 2>&1) > "$OUT/fa.txt"; echo "flashattn rc=$? pass $(grep -c -- '--- PASS' "$OUT/fa.txt") fail $(grep -c -- '--- FAIL' "$OUT/fa.txt") $((SECONDS-t0))s"
grep -E "^--- " "$OUT/fa.txt"; xz -9 "$OUT/fa.txt"
