#!/usr/bin/env bash
# Lead run 1 (session 3): GPU tests of main on two H200s, fused-backward harness checks.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=.build/lead
date -u | tee "$OUT/date.txt"; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv"; cat "$OUT/nvidia-smi.csv"
python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$OUT/date.txt"
(cd $L && tar -xJf bins.tar.xz) || exit 9
(cd flashattn && timeout 330 "../$L/flashattn.test" -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode' -test.v -test.count=1 -test.timeout 320s) > "$OUT/gpu-tests.txt" 2>&1
echo "go gpu tests rc=$?"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" "$OUT/gpu-tests.txt" | head -20
grep -E "^    --- FAIL|^--- FAIL" "$OUT/gpu-tests.txt" | head -30
grep -E "TestGPUBenchLaunchCost|launch_cost|cuLaunchKernel .* µs" "$OUT/gpu-tests.txt" | head
(cd internal/cuda && timeout 60 "../../$L/cuda.test" -test.v -test.count=1) > "$OUT/cuda-tests.txt" 2>&1; echo "cuda tests rc=$?"
timeout 90 "$L/bwd_check" internal/kernels > "$OUT/bwd_check.log" 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " "$OUT/bwd_check.log" | tail -4
for tool in memcheck racecheck; do
  BWD_ONLY=kvqsm80 BWD_SHAPES=1,3,7 timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 9 "$L/bwd_check" internal/kernels > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$?"; tail -2 "$OUT/san_$tool.log"
done
