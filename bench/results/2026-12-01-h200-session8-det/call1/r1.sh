#!/bin/bash
# session 8 call 1: the causal ordered pass in descending key-block order (det1 causal), late release, 128-key D64 tiles
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
date -u >> $OUT/gpu.txt
B=.build/s8
BWD_ONLY="_det1|L128" timeout 150 $B/bwd_tiles internal/kernels > $OUT/check.txt 2>&1; echo "rc=$?" >> $OUT/check.txt
BWD_BENCH=1 BWD_ONLY="sm80_d64|sm80_d128" timeout 150 $B/bwd_tiles > $OUT/bench.txt 2>&1; echo "rc=$?" >> $OUT/bench.txt
BWD_BENCH=1 BWD_ONLY="_det" timeout 100 $B/bwd_late > $OUT/bench_late.txt 2>&1; echo "rc=$?" >> $OUT/bench_late.txt
tail -3 $OUT/check.txt; grep -c "^ok" $OUT/check.txt; grep FAIL $OUT/check.txt | head
cat $OUT/bench.txt $OUT/bench_late.txt | cut -c1-110
