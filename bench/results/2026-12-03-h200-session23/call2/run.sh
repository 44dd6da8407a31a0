#!/bin/bash
# session 23 call 2: TestGPUConformanceSmem99 with its bf16 run over every backward head dim; the GPU set beside it
cd "$(dirname "$0")/../.."
tar xJf .build/c2/b.tar.xz -C .build/c2 && cp .build/c2/small.fatbin internal/kernels/fa2.fatbin
B=.build/c2/flashattn.test
( time timeout 500 $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout 500 $B -test.run 'GPU|Ladder|Table' -test.skip 'Hopper|Smem99' -test.count=1 -test.v ) > $OUT/gpu.txt 2>&1 &
wait
for f in smem99 gpu; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/$f.txt | head -20; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt)"; done
grep -A3 -- "--- FAIL" $OUT/smem99.txt | head -20
