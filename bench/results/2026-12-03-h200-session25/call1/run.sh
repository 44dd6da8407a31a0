#!/bin/bash
# session 25 call 1: Turing's D256 backward (the three kernels with two column groups per
# 16 owned rows, traits.cuh's FA2_BWD_TILES row (75, 256)) on the forced sm_75 path, its
# memcheck/racecheck, and session 24's unchecked default D256 modified single pass.
cd "$(dirname "$0")/../../../.."
tar xJf .build/c1/b.tar.xz -C .build/c1
cp .build/c1/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c1/flashattn.test
cd flashattn
T=470
( time timeout $T $B -test.run 'TestGPUConformanceSM75$' -test.count=1 -test.v ) > $OUT/sm75.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUModifiedBackwardKernels|TestGPUVarlenConformance|TestGPUAutoAndReasons|TestGPUBackwardDevice|TestGPURawConformanceSM75|TestGPURawErrors' -test.count=1 -test.v ) > $OUT/turing.txt 2>&1 &
( time timeout $T compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run 'TestGPUModifiedBackwardKernels$/path75' -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
( time timeout $T compute-sanitizer --tool racecheck --error-exitcode 9 $B -test.run 'TestGPUModifiedBackwardKernels$/path75' -test.count=1 -test.v ) > $OUT/racecheck.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUConformanceBackward$|TestGPUVarlenBF16' -test.count=1 -test.v ) > $OUT/s24.txt 2>&1 &
wait
( time timeout 100 $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1
for f in sm75 turing memcheck racecheck s24 smem99; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/$f.txt | head -12; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt) skip $(grep -c -- '--- SKIP' $OUT/$f.txt)"; grep -B2 -A8 -- "--- FAIL" $OUT/$f.txt | head -40; done
grep -c "at-D256" $OUT/sm75.txt
xz -9 $OUT/*.txt
cd ..
# Relative only (H200 timings of the Turing kernels, not T4 ones): D256 beside D128 on the forced sm_75 path.
for d in 128 256; do timeout 60 .build/c1/goflash bench --backend gpu --no-report --force-arch 75 --seqlens 2048,4096 --headdims $d --heads 8 --direction bwd --reps 10; done > $OUT/bench75.txt 2>&1
cat $OUT/bench75.txt
