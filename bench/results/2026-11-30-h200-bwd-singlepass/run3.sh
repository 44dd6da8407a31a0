#!/usr/bin/env bash
# bwd2 dev run 3: dQ accumulator in fragment order; check, sanitizer, bench
set -uo pipefail
B=.build/bwd2; OUT=${OUT:-/tmp/out}
date -u
BWD_ONLY="kvq|_det" timeout 60 $B/bwd_check internal/kernels > $OUT/check.log 2>&1; echo "check rc=$?"
grep -v "^ok " $OUT/check.log | head -20
for tool in memcheck racecheck; do
  BWD_ONLY="kvqsm80" BWD_SHAPES=1,3 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.log 2>&1; echo "$tool rc=$?"; tail -2 $OUT/san_$tool.log
done
BWD_BENCH=1 timeout 100 $B/bwd_check internal/kernels 2>&1 | tee $OUT/bench.log | grep bench | sed 's/; fused: dq = convert//'
