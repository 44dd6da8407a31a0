#!/bin/bash
# session 25 call 3: the Turing D256 backward with the chunk's S/dP split over the column groups
# (each warp computes its half of the query (dK/dV) or key (dQ) columns and the P / dS fragments are
# put together through shared memory; dQ streams 16 keys) in .build/c3, against call 2's build
# (each column group computing all of S and dP) in .build/c2: forced sm_75 path, timed interleaved
# (relative only: H200, not T4), then c3's conformance, the Turing tests and the sanitizers.
cd "$(dirname "$0")/../../../.."
tar xJf .build/c3/b.tar.xz -C .build/c3; mkdir -p .build/c2 && xz -dc .build/c2g/goflash.xz > .build/c2/goflash && chmod +x .build/c2/goflash
cp .build/c3/small.fatbin internal/kernels/fa2.fatbin
for r in 1 2; do for c in c2 c3; do for d in 256 128; do
  echo "=== $c D$d"; timeout 60 .build/$c/goflash bench --backend gpu --no-report --force-arch 75 --seqlens 2048,4096 --headdims $d --heads 8 --direction bwd --reps 10 | grep " bwd "
done; done; done > $OUT/bench75.txt 2>&1
cat $OUT/bench75.txt
B=$PWD/.build/c3/flashattn.test
cd flashattn
T=400
R='TestGPUConformanceSM75$/fwd\+bwd/(N1-causal-mqa|Nq97-Nk1|window-l0-causal-N33|N1025-causal-gqa2|all-window-softcap-alibi-causal-gqa2|Nq97-Nk17-causal-gqa8|N97-causal-gqa8-D256)(-at-D256)?$'
( time timeout $T $B -test.run 'TestGPUConformanceSM75$' -test.count=1 -test.v ) > $OUT/sm75.txt 2>&1 &
( time timeout $T $B -test.run 'TestGPUModifiedBackwardKernels|TestGPUAutoAndReasons|TestGPUBackwardDevice|TestGPURawConformanceSM75|TestGPUVarlenConformance$/path75' -test.count=1 -test.v ) > $OUT/turing.txt 2>&1 &
( time timeout $T compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
( time timeout $T compute-sanitizer --tool racecheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/racecheck.txt 2>&1 &
( time timeout $T compute-sanitizer --tool synccheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/synccheck.txt 2>&1 &
wait
for f in sm75 turing memcheck racecheck synccheck; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/$f.txt | head -12; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt) skip $(grep -c -- '--- SKIP' $OUT/$f.txt)"; grep -B2 -A8 -- "--- FAIL" $OUT/$f.txt | head -30; done
xz -9 $OUT/*.txt
