#!/usr/bin/env bash
# session 8 call 6: D128 dev tile S4V2 (S^T 4x2, dK/dV 2x4) beside the shipped D128 large tile
cd "$(dirname "$0")/../.."
B=.build/s8; date -u
BWD_ONLY="S4V2" timeout 100 $B/bwd_s4v2 internal/kernels > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -2 $OUT/check.txt
for r in 1 2; do BWD_BENCH=1 BWD_ONLY="sm80_d128_large|sm80_d128_S4V2|sm80_d128_causal_large|sm80_d128_causal_S4V2" timeout 100 $B/bwd_s4v2 > $OUT/bench$r.txt 2>&1; grep "^bench" $OUT/bench$r.txt | grep -v "_det\|_3k" | awk '{print $2, $3, $4, $11, $12}'; done
date -u
