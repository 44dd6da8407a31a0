#!/usr/bin/env bash
# session 12, call 6: the Go GPU tests at commit 7f00ed5 (the tensor maps encoded without
# allocating, the fault test's Hopper launch, TestGPUHopperForward's larger case cut to 8 heads).
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
OUT=${OUT:-/tmp/out}; B=/tmp/s12c; mkdir -p "$OUT" $B; xz -dc .build/s12c/flashattn.test.xz > $B/flashattn.test; chmod +x $B/flashattn.test
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 500 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen|ScoreMods|Hopper' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt")
grep -cE "^--- PASS" "$OUT/tests.txt"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" "$OUT/tests.txt" | head -30
grep -B3 -A15 -- "--- FAIL" "$OUT/tests.txt" | head -60
grep -A12 "=== RUN   TestGPUHopperForward$" "$OUT/tests.txt" | head -30; grep -E "^--- (PASS|FAIL): TestGPU(HopperForward|KernelFault|RawEnqueueAllocs|ConformanceSM80|RawConformanceSM80)" "$OUT/tests.txt"
