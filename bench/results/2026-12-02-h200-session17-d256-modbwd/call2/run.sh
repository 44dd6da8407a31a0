#!/usr/bin/env bash
# Session 17, call 2: the rest of the flashattn GPU tests on c5e7723's binaries (call 1 ran out of time after
# TestGPUVarlenConformance), and the plain backward A/B against main (07c01c7): pre and the convert kernel changed.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/f; mkdir -p "$OUT" $B
xz -dc .build/s17/f.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
(cd flashattn && timeout 400 $B/flashattn.test -test.run '^(TestGPUAbsentOrPresentIsClean|TestGPUBackwardDeterministicRepeats|TestGPUBackwardDevice|TestGPUBackwardFreesMemory|TestGPUBackwardPaths|TestGPUBenchBackward|TestGPUBenchKVCache|TestGPUBenchLaunchCost|TestGPUBenchVarlen|TestGPUCloseFreesMemory|TestGPUConcurrentForward|TestGPUConformance|TestGPUConformanceBF16|TestGPUDeviceErrors|TestGPUHopperCubinFallback|TestGPUHopperFewCTAs|TestGPUHopperForward|TestGPUKVCacheAppendDevice|TestGPUKVCacheBF16|TestGPUKVCacheConformance|TestGPUKVCacheDevice|TestGPUKernelFault|TestGPULongSequence|TestGPUOutOfMemory|TestGPURawConformance|TestGPURawConformanceBF16|TestGPURawConformanceSM75|TestGPURawConformanceSM80|TestGPURawEnqueueAllocs|TestGPURawErrors|TestGPURawExample|TestGPURawInterop|TestGPURefusesWhatFP16CannotHold|TestGPURunsScoreMods|TestGPUTorchInterop|TestGPUTwoDevices|TestGPUUploadDownload|TestGPUVarlenBF16|TestGPUVarlenErrors|TestHopperKernelTable)$' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/tests.txt")
grep -cE -- "--- PASS" "$OUT/tests.txt"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL|^--- (PASS|FAIL|SKIP)" "$OUT/tests.txt" | head -60
for i in 1 2; do for v in main new; do g=$B/goflash; [ $v = main ] && g=$B/goflash-main
  timeout 60 $g bench --seqlens 2048,8192 --headdims 64,128,256 --causal both --direction bwd --reps 10 --warmup 3 --no-report --out /tmp/ab-$v-$i > "$OUT/ab-$v-$i.txt" 2>&1
done; done
echo "done ${SECONDS}s"; grep -h "bwd " "$OUT"/ab-*.txt | head -48
