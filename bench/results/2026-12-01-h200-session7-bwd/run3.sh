#!/usr/bin/env bash
# session 7 call 3: the dQ adds between dV and dK (bwd_check tpl80 only): check + per-kernel timings
set -uo pipefail
B=.build/s7; mkdir -p $OUT; date -u
BWD_ONLY="kvqsm80" timeout 120 $B/bwd_check internal/kernels > $OUT/bwd_check3.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check3.log | tail -4
BWD_BENCH=1 BWD_ONLY="_large" timeout 100 $B/bwd_check internal/kernels > $OUT/bwdbench3.log 2>&1; echo "bwdbench rc=$?"; grep ^bench $OUT/bwdbench3.log | awk '{print $2,$3,$4,$6,$9,$11,$13}'
