#!/usr/bin/env bash
# session 12, call 5: the Go GPU tests with the Hopper forward (default path on the H200: the
# Hopper kernels at D64/D128 fp16; ForcePath(80) and (75) suites too), then the FA2 paper sweep
# beside PyTorch SDPA with the sm_80 kernels as a second line. Carry .build/s12b.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
OUT=${OUT:-/tmp/out}; B=/tmp/s12b; mkdir -p "$OUT" $B; tar -xJf .build/s12b/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 360 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen|ScoreMods|Hopper' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt")
grep -cE "^--- PASS" "$OUT/tests.txt"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" "$OUT/tests.txt" | head -30
grep -B3 -A15 -- "--- FAIL" "$OUT/tests.txt" | head -80
echo "== bench $(date -u +%T)"
timeout 200 $B/goflash bench --compare-torch --with-sm80 --out "$OUT/paper" > "$OUT/bench.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s"
tail -45 "$OUT/bench.txt"
