#!/usr/bin/env bash
# session 8 call 8: D64 dev tiles with FA2's shape (128 keys x 128 queries) beside the shipped 192 x 64
cd "$(dirname "$0")/../.."
B=.build/s8; date -u
BWD_ONLY="Q244|Q288" timeout 100 $B/bwd_q128 internal/kernels > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -2 $OUT/check.txt; grep FAIL $OUT/check.txt | head -3
BWD_BENCH=1 BWD_ONLY="sm80_d64_large|sm80_d64_Q|sm80_d64_causal_large|sm80_d64_causal_Q" timeout 100 $B/bwd_q128 > $OUT/bench.txt 2>&1; grep "^bench" $OUT/bench.txt | grep -v "_det\|_3k" | awk '{print $2, $3, $4, $11, $12}'
date -u
