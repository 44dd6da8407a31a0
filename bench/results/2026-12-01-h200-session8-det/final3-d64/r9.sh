#!/usr/bin/env bash
# session 8 call 9: D64's single pass on FA2's tile (128 x 128) with the pre kernel zeroing the whole last block: checks, sanitizers, per-kernel bench, kernel time (D64), Go GPU tests
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.build/s8; date -u
timeout 100 $B/bwd_check internal/kernels > $OUT/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check.log | tail -5
for tool in memcheck racecheck; do
  BWD_ONLY="kvqsm80_d64" BWD_SHAPES=1,3,7 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.txt 2>&1; echo "san $tool rc=$?"; grep -c "^ok " $OUT/san_$tool.txt; tail -2 $OUT/san_$tool.txt
done
BWD_BENCH=1 BWD_ONLY="sm80_d64" timeout 40 $B/bwd_check > $OUT/bwd_bench.txt 2>&1; grep "^bench" $OUT/bwd_bench.txt | awk '{print $2, $3, $4}'
PYTHONUNBUFFERED=1 timeout 60 python3 kernels/dev/kernel_time.py d64 > $OUT/kernel_level.txt 2>&1; echo "kt rc=$?"; grep -v -i warn $OUT/kernel_level.txt | cut -c1-105
date -u
(cd flashattn && timeout 120 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.count=1 -test.v > $OUT/gotest.txt 2>&1; echo "go rc=$?")
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" $OUT/gotest.txt | head; echo "pass $(grep -c '^--- PASS' $OUT/gotest.txt) skip $(grep -c '^--- SKIP' $OUT/gotest.txt)"
PYTHONUNBUFFERED=1 timeout 40 python3 kernels/dev/kernel_time.py --fwdbwd d64 > $OUT/kernel_level_fwdbwd.txt 2>&1; echo "kt2 rc=$?"; grep -v -i warn $OUT/kernel_level_fwdbwd.txt | cut -c1-105
date -u
