#!/usr/bin/env bash
# Session 10, call 7: the modified forward with clean blocks in their own loop (fatbin of this commit):
# Go GPU tests, compute-sanitizer on the modifier cases. From the repo root, carry .build/c7.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c7; B=/tmp/c7
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
cd flashattn || exit 9
t0=$SECONDS
timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt &
c='(window|softcap|alibi|all)'
san() { timeout 200 compute-sanitizer --tool "$1" --error-exitcode 9 $B/flashattn.test -test.run "$2" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" ; echo "rc=${PIPESTATUS[0]} ($1 $2)"; }
{ san memcheck "TestGPUConformance\$/$c"; san memcheck "TestGPUConformanceSM75/$c"; san memcheck "TestGPUConformanceBF16\$/$c"
  san racecheck "TestGPUConformance\$/$c"; san racecheck "TestGPUConformanceSM75/$c"; } > $OUT/san.txt 2>&1
wait
echo "all $((SECONDS-t0))s"
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL" $OUT/tests.txt | head -30
grep -E "window-l300|softcap12-alibi|window-l450" $OUT/tests.txt | grep -E -- "--- (PASS|FAIL)" | head -20
cat $OUT/san.txt
