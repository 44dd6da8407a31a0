#!/usr/bin/env bash
# session 8 call 3 (and 5): the build to ship (ordered pass heads fastest, release after the next step's P^T/dS^T barrier; D64 causal twin): checks, sanitizers, per-kernel bench, kernel time beside SDPA flash
set -uo pipefail
cd "$(dirname "$0")/../.."
B=.build/s8; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/bwd_check internal/kernels > $OUT/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check.log | tail -6
for tool in memcheck racecheck; do
  BWD_ONLY="large_det|causaldet_det" BWD_SHAPES=1,3,7 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.txt 2>&1; echo "san $tool rc=$?"; grep -c "^ok " $OUT/san_$tool.txt; tail -2 $OUT/san_$tool.txt
done
date -u
BWD_BENCH=1 BWD_ONLY="sm80_d64|sm80_d128" timeout 120 $B/bwd_check > $OUT/bwd_bench.txt 2>&1; echo "bench rc=$?"
grep "^bench" $OUT/bwd_bench.txt | grep -v "_base" | awk '{print $2, $3, $4}'
date -u
PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/kernel_time.py > $OUT/kernel_level.txt 2>&1; echo "kt rc=$?"; grep -v -i warn $OUT/kernel_level.txt | cut -c1-120
PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/kernel_time.py --fwdbwd > $OUT/kernel_level_fwdbwd.txt 2>&1; echo "kt2 rc=$?"; grep -v -i warn $OUT/kernel_level_fwdbwd.txt | cut -c1-120
date -u
