#!/usr/bin/env bash
# session 8 call 7: the final build (D128 non-causal grid S^T 4x2 / dK/dV 2x4; ordered pass as shipped in d4cb625): checks, sanitizers, per-kernel bench, kernel time beside SDPA flash, Go GPU tests, goflash bench
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.build/s8; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/bwd_check internal/kernels > $OUT/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check.log | tail -6
for tool in memcheck racecheck; do
  BWD_ONLY="large_det|causaldet_det|kvqsm80_d128_large" BWD_SHAPES=1,3,7 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.txt 2>&1; echo "san $tool rc=$?"; grep -c "^ok " $OUT/san_$tool.txt; tail -2 $OUT/san_$tool.txt
done
BWD_BENCH=1 BWD_ONLY="sm80_d64|sm80_d128" timeout 120 $B/bwd_check > $OUT/bwd_bench.txt 2>&1; echo "bench rc=$?"
grep "^bench" $OUT/bwd_bench.txt | grep -v "_base" | awk '{print $2, $3, $4}'
PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/kernel_time.py > $OUT/kernel_level.txt 2>&1; echo "kt rc=$?"; grep -v -i warn $OUT/kernel_level.txt | cut -c1-105
PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/kernel_time.py --fwdbwd > $OUT/kernel_level_fwdbwd.txt 2>&1; echo "kt2 rc=$?"; grep -v -i warn $OUT/kernel_level_fwdbwd.txt | cut -c1-105
date -u
(cd flashattn && timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.count=1 -test.v > $OUT/gotest.txt 2>&1; echo "go rc=$?")
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" $OUT/gotest.txt | head; echo "pass $(grep -c '^--- PASS' $OUT/gotest.txt) skip $(grep -c '^--- SKIP' $OUT/gotest.txt)"; grep "^--- SKIP" $OUT/gotest.txt
date -u
timeout 200 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "bench rc=$?"
grep -A70 "^goflash bench on" $OUT/bench_fwdbwd.txt | grep -v "^wrote" | grep " 128 " | cut -c1-150
rm -f $OUT/fb/bench.html; date -u
