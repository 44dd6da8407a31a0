#!/usr/bin/env bash
# bwd2 dev run 1: correctness of the 2-D layout kernels, sanitizer, per-kernel bench
set -uo pipefail
B=.build/bwd2; OUT=${OUT:-/tmp/out}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BWD_ONLY="kvq|_det" timeout 100 $B/bwd_check internal/kernels > $OUT/check.log 2>&1; echo "check rc=$?"
grep -v "^ok " $OUT/check.log | head -30; tail -3 $OUT/check.log
for tool in memcheck racecheck; do
  BWD_ONLY="kvqsm80" BWD_SHAPES=1,3 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.log 2>&1; echo "$tool rc=$?"; tail -3 $OUT/san_$tool.log
done
BWD_BENCH=1 timeout 120 $B/bwd_check internal/kernels 2>&1 | tee $OUT/bench.log | grep bench
