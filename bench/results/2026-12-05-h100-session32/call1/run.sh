#!/usr/bin/env bash
# Session 32, call 1 (carry .build/s32: b.tar.xz = flashattn.test built with CGO_ENABLED=0 from main,
# fa2.fatbin reduced to its sm_90 image; goflash did not fit the 64 MiB beside it). (1) the decode read floor, register loads
# against the bulk copy engine (dev/readfloor_tma.cu.txt, .py, session 20's readfloor.cu), beside the shipped
# decode call and cuDNN; (2) what session 30 left unrun on main's cubin: the whole Hopper forward tests, the whole GPU conformance suite, concurrency.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c1; D=bench/results/2026-12-05-h100-session32/dev
mkdir -p "$OUT" $B; xz -dc .build/s32/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nvcc --version | tail -1; } | tee "$OUT/gpu.txt"
t0=$SECONDS
nvcc -O3 -arch=sm_90 -cubin -o $B/regs.cubin bench/results/2026-12-02-h200-session20/dev/readfloor.cu &&
  nvcc -O3 -arch=sm_90 -cubin -x cu -o $B/bulk.cubin $D/readfloor_tma.cu.txt || echo "nvcc failed"
timeout 200 env PYTHONUNBUFFERED=1 python3 $D/readfloor_tma.py $B/regs.cubin $B/bulk.cubin > "$OUT/readfloor.txt" 2>&1
echo "readfloor rc=$? $((SECONDS-t0))s"; cat "$OUT/readfloor.txt"
cd flashattn || exit 1
run() {  # name timeout regex
  timeout "$2" $B/flashattn.test -test.run "$3" -test.v -test.count=1 > "$OUT/$1.txt" 2>&1; local rc=$?
  echo "$1 rc=$rc $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/$1.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/$1.txt") skip $(grep -cE '^\s*--- SKIP' "$OUT/$1.txt")"
  grep -E "^--- |^(FAIL|ok|panic)" "$OUT/$1.txt"
}
run hopper 180 'TestGPUHopperForward$|TestHopperKernelTable|TestGPUHopperCubinFallback'
run conformance 200 'TestGPUConformance$'
run concurrent 60 'TestGPUConcurrentForward$'
cd "$OUT" && tar -cJf tests.tar.xz hopper.txt conformance.txt concurrent.txt && rm hopper.txt conformance.txt concurrent.txt
echo "all done $((SECONDS-t0))s"
