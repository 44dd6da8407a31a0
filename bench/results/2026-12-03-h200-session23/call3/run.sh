#!/bin/bash
# session 23 call 3: D256's base ordered twin (base_det): TestGPUConformanceSmem99 (default, deterministic, bf16), sanitizers, timing
cd "$(dirname "$0")/../.."
tar xJf .build/c3/b.tar.xz -C .build/c3 && cp .build/c3/small.fatbin internal/kernels/fa2.fatbin
B=.build/c3/flashattn.test
R='TestGPUConformanceSmem99$/deterministic/(N1025-causal-gqa2|Nq17-Nk97-causal|Nq1025-Nk97-causal|window-l20-causal-gqa4-Nq65-Nk300|softcap12-alibi-Nq600-Nk700-gqa2)-at-D256'
( time timeout 420 $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout 380 compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
( time timeout 380 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/racecheck.txt 2>&1 &
wait
echo "== smem99"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/smem99.txt | head; echo "pass $(grep -c -- '--- PASS' $OUT/smem99.txt) fail $(grep -c -- '--- FAIL' $OUT/smem99.txt)"
grep -B3 -- "--- FAIL" $OUT/smem99.txt | head -30
for f in memcheck racecheck; do echo "== $f: $(grep -c -- '--- PASS' $OUT/$f.txt) subtests pass"; tail -4 $OUT/$f.txt; done
( time timeout 120 python3 kernels/dev/sidebyside.py --bwd --smem99 d256 2048 8192 ) > $OUT/sbs99.txt 2>&1; cat $OUT/sbs99.txt
