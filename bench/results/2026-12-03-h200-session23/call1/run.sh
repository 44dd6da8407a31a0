#!/bin/bash
# session 23 call 1: the D256 base single pass (sm_86/89 rows) on the H200 within 99 KiB
cd "$(dirname "$0")/../.."
tar xJf .build/c1/b.tar.xz -C .build/c1 && cp .build/c1/small.fatbin internal/kernels/fa2.fatbin
B=.build/c1/flashattn.test
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R='TestGPUConformanceSmem99$/(N97-gqa2|Nq17-Nk97-causal|head-major-Nq65-Nk40|Nq1025-Nk97-causal|window-l20-causal-gqa4-Nq65-Nk300|softcap12-alibi-Nq600-Nk700-gqa2)-at-D256'
( time timeout 400 $B -test.run 'TestGPUConformanceSmem99$|TestGPUBackwardPaths|TestGPUConformanceBackward' -test.count=1 -test.v ) > $OUT/conf.txt 2>&1 &
( time timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 ) > $OUT/memcheck.txt 2>&1 &
( time timeout 400 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $B -test.run "$R" -test.count=1 ) > $OUT/racecheck.txt 2>&1 &
wait
echo "== conf"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/conf.txt | head -30; grep -c -- "--- PASS" $OUT/conf.txt; grep -c -- "--- FAIL" $OUT/conf.txt; grep -E "smem|within" $OUT/conf.txt | head -5
echo "== memcheck"; tail -6 $OUT/memcheck.txt
echo "== racecheck"; tail -6 $OUT/racecheck.txt
( time timeout 170 python3 kernels/dev/sidebyside.py --bwd d256 2048 8192 ) > $OUT/sbs.txt 2>&1
( time timeout 170 python3 kernels/dev/sidebyside.py --bwd --smem99 d128 d256 2048 8192 ) > $OUT/sbs99.txt 2>&1
echo "== sbs"; cat $OUT/sbs.txt; echo "== sbs99"; cat $OUT/sbs99.txt
