#!/bin/bash
# session 25 call 4: the shipped build (7b501c2; flashattn.test with fa2.fatbin cut to its sm_90
# image): the forced Turing conformance and the default path's conformance, forward and backward.
cd "$(dirname "$0")/../../../.."
xz -dc .build/c4/flashattn.test.xz > .build/c4/flashattn.test && chmod +x .build/c4/flashattn.test
cp .build/c4/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c4/flashattn.test
cd flashattn
T=330
( time timeout $T $B -test.run 'TestGPUConformanceSM75$' -test.count=1 -test.v ) > $OUT/sm75.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUConformance$|TestGPUConformanceBackward$|TestGPUModifiedBackwardKernels|TestGPUAutoAndReasons|TestGPUBackwardDevice' -test.count=1 -test.v ) > $OUT/default.txt 2>&1 &
wait
for f in sm75 default; do echo "== $f"; grep -E "^(--- |FAIL|ok|PASS)|^real|panic" $OUT/$f.txt | head -12; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt) skip $(grep -c -- '--- SKIP' $OUT/$f.txt)"; grep -B2 -A8 -- "--- FAIL" $OUT/$f.txt | head -30; done
xz -9 $OUT/*.txt
