#!/usr/bin/env bash
# session 12, call 8: TestGPUHopperForward after the fix of its threshold cases (D128 has none)
# and its larger case cut to 4 heads (the float64 reference took minutes at 8).
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
OUT=${OUT:-/tmp/out}; B=/tmp/s12e; mkdir -p "$OUT" $B; xz -dc .build/s12e/flashattn.test.xz > $B/flashattn.test; chmod +x $B/flashattn.test
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 150 $B/flashattn.test -test.run 'TestGPUHopperForward|TestHopperKernelTable' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt")
grep -E "^(--- |FAIL|ok|PASS|panic|rc=)|^    --- |gpu_sm90a_test" "$OUT/tests.txt" | head -40
