#!/usr/bin/env bash
# Session 16, call 2: branch s16 (packed sequences through every modified forward; the D64 Hopper
# modified tile Br 192 / Bc 64 / 4 stages): the Go GPU tests and compute-sanitizer. Carry .build/s16/p.tar.xz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/p; mkdir -p "$OUT" $B
[ -x $B/flashattn.test ] || xz -dc .build/s16/p.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
cd flashattn || exit 9
t0=$SECONDS
timeout 420 $B/flashattn.test -test.run 'TestGPU|KernelTable|ScoreMods|Hopper' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt &
c='(varlen-window|varlen-all|varlen-d64-window|varlen-d128|varlen-d96|varlen-d256)'
san() { timeout 200 compute-sanitizer --tool "$1" --error-exitcode 9 $B/flashattn.test -test.run "$2" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" ; echo "rc=${PIPESTATUS[0]} ($1 $2) $((SECONDS-t0))s"; }
{ san memcheck "TestGPUVarlenConformance/path0/$c"; san memcheck "TestGPUVarlenBF16/$c"; san racecheck "TestGPUVarlenConformance/path0/$c"
  san memcheck "TestGPUHopperForward"; san racecheck "TestGPUHopperForward"; san memcheck "TestGPUConformanceSM80"; } > $OUT/san.txt 2>&1
wait
echo "all $((SECONDS-t0))s"
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL" $OUT/tests.txt | head -30
grep -E "varlen-d(96|256)|TestGPUVarlenErrors|TestGPUHopperForward/" $OUT/tests.txt | grep -E -- "--- (PASS|FAIL|SKIP)" | head -30
cat $OUT/san.txt
