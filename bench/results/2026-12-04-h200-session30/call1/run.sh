#!/usr/bin/env bash
# Session 30, call 1 (carry .build/s30/b.tar.xz): (1) the tensor-map encoder with its context current:
# cuda_old.test = TestGPUTensorMapOnAThreadWithoutContext over the old encoder (driver call on whatever
# thread), cuda.test = main's fix; (2) kSInit in the window-only D64 Hopper kernel (goflash_new,
# flashattn_new.test embed that cubin; goflash_base main's): its tests, the window conformance cases,
# sanitizers, and goflash bench interleaved with main's cubin.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/s30/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for g in cuda_old cuda; do
  (cd internal/cuda && timeout 60 $B/$g.test -test.run 'TensorMap' -test.v -test.count=3 2>&1) > "$OUT/$g.txt"; echo "$g rc=$?"; grep -E "^\s*--- |^(ok|FAIL|PASS)|CONTEXT" "$OUT/$g.txt" | head -6
done
(cd internal/cuda && timeout 60 $B/cuda.test -test.v -test.count=1 2>&1) > "$OUT/cuda_all.txt"; echo "cuda all rc=$? pass $(grep -c -- '--- PASS' "$OUT/cuda_all.txt") fail $(grep -c -- '--- FAIL' "$OUT/cuda_all.txt") skip $(grep -c -- '--- SKIP' "$OUT/cuda_all.txt")"
cd flashattn || exit 1
{ timeout 130 $B/flashattn_new.test -test.run 'TestGPUHopperForward$|TestHopperKernelTable|TestGPUHopperCubinFallback|TestGPUConcurrentForward' -test.v -test.count=1
  timeout 120 $B/flashattn_new.test -test.run 'TestGPUConformance$/window' -test.v -test.count=1; } > "$OUT/test.txt" 2>&1
echo "tests rc=$? $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/test.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/test.txt")"; grep -E "^--- |^(FAIL|ok|panic)" "$OUT/test.txt"
for tool in memcheck synccheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_new.test -test.run 'TestGPUHopperForward/mods-d64' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/$tool.txt"; echo "$tool rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
cd ..
for r in 1 2; do
  for m in "--window 32768,-1" "--window 2048,-1"; do
    for g in base new; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 4096,8192 --headdims 64 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/bench_ab.txt" 2>&1
awk '/^== round/{g=$4; m=$5" "$6; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/bench_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"
cat "$OUT/summary.txt"; echo "all done $((SECONDS-t0))s"
