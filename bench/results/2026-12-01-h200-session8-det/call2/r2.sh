#!/bin/bash
# session 8 call 2: the ordered pass (det2, release late) with its dQ adds between dV and dK (A), + the counter read early (B: relaxed; C: relaxed then fence)
cd "$(dirname "$0")/../.."
date -u > $OUT/gpu.txt
B=.build/s8
for v in B C; do BWD_ONLY="_det2" timeout 100 $B/bwd_$v internal/kernels > $OUT/check_$v.txt 2>&1; echo "rc=$?" >> $OUT/check_$v.txt; tail -2 $OUT/check_$v.txt; done
BWD_BENCH=1 BWD_ONLY="_large|_det2" timeout 100 $B/bwd_late > $OUT/bench_late.txt 2>&1
for v in A B C; do BWD_BENCH=1 BWD_ONLY="_det2" timeout 100 $B/bwd_$v > $OUT/bench_$v.txt 2>&1; done
BWD_BENCH=1 BWD_ONLY="_det2" timeout 100 $B/bwd_late > $OUT/bench_late2.txt 2>&1
for f in late A B C late2; do echo "== $f"; grep "^bench" $OUT/bench_$f.txt | grep -v "base" | awk '{print $2, $3, $4}'; done
