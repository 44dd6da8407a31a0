#!/usr/bin/env bash
# Lead run 2 (session 3): main after bwd4 + the convert fix: backward tests, harness, bwd bench beside SDPA.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=.build/lead
date -u | tee "$OUT/date.txt"; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
(cd $L && tar -xJf bins.tar.xz) || exit 9
(cd flashattn && timeout 200 "../$L/flashattn.test" -test.run 'TestGPUConformanceBackward|TestGPUBackwardPaths|TestGPUBackward|BF16Backward|KernelTable|TestGPUBenchLaunchCost' -test.v -test.count=1) > "$OUT/gpu-bwd-tests.txt" 2>&1
echo "go rc=$?"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL" "$OUT/gpu-bwd-tests.txt" | head; grep "µs" "$OUT/gpu-bwd-tests.txt"
timeout 90 "$L/bwd_check" internal/kernels > "$OUT/bwd_check.log" 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " "$OUT/bwd_check.log" | tail -3
BWD_ONLY=kvqsm80 BWD_SHAPES=1,3,7 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$L/bwd_check" internal/kernels > "$OUT/san_memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -1 "$OUT/san_memcheck.log"
BWD_ONLY=kvqsm80 BWD_SHAPES=1,3 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 "$L/bwd_check" internal/kernels > "$OUT/san_racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -1 "$OUT/san_racecheck.log"
timeout 200 $L/goflash bench --compare-torch --direction bwd --seqlens 2048,4096,8192 --headdims 64,128 --reps 10 --warmup 3 --out "$OUT/bench" --sdpa bench/sdpa.py > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"; grep -A40 "^ *dir" "$OUT/bench.txt"
