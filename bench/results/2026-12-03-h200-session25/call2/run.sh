#!/bin/bash
# session 25 call 2: the final build (fa2.fatbin's other kernels SASS-identical to b4b5a33's, the
# D256 Turing backward's SASS and PTX identical to call 1's): TestGPUConformanceSM75 with the
# zero-gradient floor, memcheck/racecheck on its D256 cases of Nk = 1 and N 1025, the tests that
# name the Turing D256 kernels, and TestGPUConformanceSmem99 whole (call 1 gave it 100 s).
cd "$(dirname "$0")/../../../.."
tar xJf .build/c2/b.tar.xz -C .build/c2
cp .build/c2/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c2/flashattn.test
cd flashattn
T=480
R='TestGPUConformanceSM75$/fwd\+bwd/(N1-causal-mqa|Nq97-Nk1|window-l0-causal-N33|N1025-causal-gqa2|all-window-softcap-alibi-causal-gqa2|Nq97-Nk17-causal-gqa8)-at-D256$'
( time timeout $T $B -test.run 'TestGPUConformanceSM75$' -test.count=1 -test.v ) > $OUT/sm75.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUModifiedBackwardKernels|TestGPUAutoAndReasons|TestGPUBackwardDevice|TestGPURawConformanceSM75|TestGPUVarlenConformance' -test.count=1 -test.v ) > $OUT/turing.txt 2>&1 &
( time timeout $T compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
( time timeout $T compute-sanitizer --tool racecheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/racecheck.txt 2>&1 &
wait
for f in sm75 smem99 turing memcheck racecheck; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/$f.txt | head -12; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt) skip $(grep -c -- '--- SKIP' $OUT/$f.txt)"; grep -B2 -A8 -- "--- FAIL" $OUT/$f.txt | head -40; done
grep -A6 -E "=== RUN   TestGPUConformanceSM75/fwd\+bwd/(N1-causal-mqa|Nq97-Nk1|window-l0-causal-N33)-at-D256$" $OUT/sm75.txt
xz -9 $OUT/*.txt
