#!/usr/bin/env bash
# Session 32, call 3 (kind nvidia-h100-x1; carry .build/s32: b.tar.xz = call 1's flashattn.test, main,
# fa2.fatbin reduced to its sm_90 image, fa2_sm75.fatbin emptied). The GPU tests on the first H100
# (call 1 ran the Hopper forward, conformance and concurrency tests), except the forced Turing path
# (its image left out to fit the 64 MiB) and the sm_86/89 emulation (Smem99), which are not the H100's.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/s32/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
cd flashattn || exit 1
timeout 470 $B/flashattn.test -test.run 'GPU|Hopper|Ladder' -test.skip 'SM75|Smem99|TestGPUHopperForward$|TestGPUConformance$|TestGPUConcurrentForward$' \
  -test.v -test.count=1 > "$OUT/tests.txt" 2>&1
echo "tests rc=$? $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/tests.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/tests.txt") skip $(grep -cE '^\s*--- SKIP' "$OUT/tests.txt")"
grep -E "^--- |^(FAIL|ok|panic)" "$OUT/tests.txt"; tail -3 "$OUT/tests.txt"
xz -9 "$OUT/tests.txt"
