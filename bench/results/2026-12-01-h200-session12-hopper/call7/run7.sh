#!/usr/bin/env bash
# session 12, call 7: causal D64 calls of <= 1024 keys on the sm_80 kernels (FA2_SM90A_TILES'
# threshold): the Hopper and conformance tests, and the D64 causal sweep showing which ran.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
OUT=${OUT:-/tmp/out}; B=/tmp/s12d; mkdir -p "$OUT" $B; tar -xJf .build/s12d/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 200 $B/flashattn.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$|TestGPUKernelFault|TestGPURawEnqueueAllocs' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/tests.txt")
grep -E "^(--- |FAIL|ok|PASS|panic|rc=)|^    --- FAIL" "$OUT/tests.txt" | head -30
grep -B3 -A15 -- "--- FAIL" "$OUT/tests.txt" | head -40
echo "== bench $(date -u +%T)"
timeout 60 $B/goflash bench --headdims 64 --causal true --seqlens 512,1024,2048 --with-sm80 --no-report --out "$OUT/d64c" > "$OUT/bench_d64c.txt" 2>&1; echo "rc=$?"; tail -12 "$OUT/bench_d64c.txt"
