#!/usr/bin/env bash
set -uo pipefail
B=.build/bwd6; O=$OUT/r; mkdir -p $O
date -u +"run %Y-%m-%dT%H:%M:%SZ" | tee $O/gpu.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/gpu.txt
BWD_ONLY=sm80_d64 timeout 60 $B/bwd_check internal/kernels >$O/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $O/bwd_check.log | tail -8; grep -c "^ok " $O/bwd_check.log
BWD_BENCH=1 BWD_ONLY=sm80_d64 timeout 90 $B/bwd_check internal/kernels 2>&1 | tee $O/bench.log | grep bench
tar -C $OUT -cJf $OUT/r.tar.xz r && rm -rf $O
