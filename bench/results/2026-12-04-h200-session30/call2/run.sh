#!/usr/bin/env bash
# Session 30, call 2 (carry .build/s30/b2.tar.xz: flashattn.test and goflash built from main at 18b6f7b,
# fa2.fatbin reduced to its sm_90 image): the Hopper forward's tests, the whole GPU conformance suite,
# concurrency, goflash check.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c2
mkdir -p "$OUT" $B; xz -dc .build/s30/b2.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 60 $B/goflash check > "$OUT/check.txt" 2>&1; echo "check rc=$? $((SECONDS-t0))s"; tail -1 "$OUT/check.txt"
cd flashattn || exit 1
run() {  # name timeout regex
  timeout "$2" $B/flashattn.test -test.run "$3" -test.v -test.count=1 > "$OUT/$1.txt" 2>&1; local rc=$?
  echo "$1 rc=$rc $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/$1.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/$1.txt") skip $(grep -cE '^\s*--- SKIP' "$OUT/$1.txt")"
  grep -E "^--- |^(FAIL|ok|panic)" "$OUT/$1.txt"
}
run hopper 170 'TestGPUHopperForward$|TestHopperKernelTable|TestGPUHopperCubinFallback'
run conformance 250 'TestGPUConformance$'
run concurrent 100 'TestGPUConcurrentForward$'
cd "$OUT" && tar -cJf tests.tar.xz hopper.txt conformance.txt concurrent.txt && rm hopper.txt conformance.txt concurrent.txt
echo "all done $((SECONDS-t0))s"
