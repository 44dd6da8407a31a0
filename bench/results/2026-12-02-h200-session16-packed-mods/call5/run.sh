#!/usr/bin/env bash
# Session 16, call 5: the final commit's Go tests (86cdf73: build.sh's fatbin and cubin) on the paths it changed.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/f; mkdir -p "$OUT" $B
xz -dc .build/s16/f.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn || exit 9
timeout 300 $B/flashattn.test -test.run 'TestGPUVarlen|TestGPUConformanceSM80|TestGPUConformanceBF16$|TestGPUHopperForward|TestHopperKernelTable|TestGPURunsScoreMods' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt"
grep -cE -- "--- PASS" "$OUT/tests.txt"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL|^--- (PASS|FAIL)" "$OUT/tests.txt" | head -20
