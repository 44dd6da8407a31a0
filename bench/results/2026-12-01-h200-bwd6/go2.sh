#!/usr/bin/env bash
set -uo pipefail
B=.build/bwd6; O=$OUT/r2; mkdir -p $O
date -u +"run %Y-%m-%dT%H:%M:%SZ" | tee $O/gpu.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/gpu.txt
(cd $B/root && PYTHONUNBUFFERED=1 timeout 100 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d64) >$O/side_d64.txt 2>&1; echo "side rc=$?"; cat $O/side_d64.txt
for t in memcheck racecheck; do BWD_ONLY='kvqsm80_d64_l192|kvqsm80_d64_causal_l192' BWD_SHAPES=1,3,7 timeout 40 compute-sanitizer --tool $t --error-exitcode 9 $B/bwd_check internal/kernels >$O/san_$t.log 2>&1; echo "san $t rc=$?"; tail -2 $O/san_$t.log; done
tar -C $OUT -cJf $OUT/r2.tar.xz r2 && rm -rf $O
