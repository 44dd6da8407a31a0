#!/usr/bin/env bash
# session 12, call 9: the fallback when the Hopper cubin does not load (TestGPUHopperCubinFallback),
# with the Hopper selection test again.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
OUT=${OUT:-/tmp/out}; B=/tmp/s12f; mkdir -p "$OUT" $B; xz -dc .build/s12f/flashattn.test.xz > $B/flashattn.test; chmod +x $B/flashattn.test
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 150 $B/flashattn.test -test.run 'TestGPUHopperCubinFallback|TestGPUHopperForward|TestGPUKernelFault' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt")
grep -E "^(--- |FAIL|ok|PASS|panic|rc=)|^    --- " "$OUT/tests.txt" | head -20; grep -B2 -A10 -- "--- FAIL" "$OUT/tests.txt" | head -30
