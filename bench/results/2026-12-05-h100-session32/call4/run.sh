#!/usr/bin/env bash
# Session 32, call 4 (kind nvidia-h100-x1; carry .build/s32: t.tar.xz = flashattn75.test from main with
# fa2.fatbin emptied and fa2_sm75.fatbin whole, so only the forced Turing path can load). The sm_75
# kernels through their compute_75 PTX on the H100: the forced suites call 3 could not run.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c4
mkdir -p "$OUT" $B; xz -dc .build/s32/t.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn || exit 1
timeout 420 $B/flashattn75.test -test.v -test.count=1 -test.run \
  'SM75|TestGPUKVCacheConformance/path75|TestGPUVarlenConformance/path75|TestLadderConformance/arch75|TestGPUModifiedBackwardKernels/path75' \
  > "$OUT/tests75.txt" 2>&1
echo "tests rc=$? $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/tests75.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/tests75.txt") skip $(grep -cE '^\s*--- SKIP' "$OUT/tests75.txt")"
grep -E "^--- |^(FAIL|ok|panic)" "$OUT/tests75.txt"; grep -m5 -E "^\s+--- FAIL" "$OUT/tests75.txt"
xz -9 "$OUT/tests75.txt"
