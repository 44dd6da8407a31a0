#!/usr/bin/env bash
# bwd2 dev run 2: dev tile bench, quick check, ncu of the shipped single pass D128
set -uo pipefail
B=.build/bwd2; OUT=${OUT:-/tmp/out}
date -u
BWD_ONLY="kvq|_det" BWD_SHAPES=1,3,4,8 timeout 60 $B/bwd_check internal/kernels > $OUT/check.log 2>&1; echo "check rc=$?"
grep -v "^ok " $OUT/check.log | head -20
BWD_BENCH=1 timeout 150 $B/bwd_check internal/kernels 2>&1 | tee $OUT/bench.log | grep bench | sed 's/; fused: dq = convert//'
BWD_BENCH=1 timeout 120 ncu -k regex:"fa2_bwd_dkdvq_sm80_d128\$" -s 0 -c 1 --set full -o $OUT/kvq_d128 $B/bwd_check internal/kernels > $OUT/ncu.log 2>&1; echo "ncu rc=$?"
ncu -i $OUT/kvq_d128.ncu-rep --page details > $OUT/ncu_d128.txt 2>&1
grep -E "Duration|Throughput|Registers Per|Occupancy|Bank|Issue Slots|Block Limit|Local|Stall|Pipe|Warp Cycles|Eligible|Active Warps|L1|L2 Hit|Executed Ipc" $OUT/ncu_d128.txt | head -60
