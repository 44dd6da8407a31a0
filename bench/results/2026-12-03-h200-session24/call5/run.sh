#!/bin/bash
# session 24 call 5: the modified single pass's bases (Q, dO, L/Di, accumulator, counters, dK/dV) set once
# in shared memory for dense and packed calls alike (call 4's build ran dense deterministic modified
# calls 9% slower): the tests that run those kernels, then old (.build/c1) and new (.build/c5) goflash
cd "$(dirname "$0")/../../../.."
for c in c1 c5; do tar xJf .build/$c/b.tar.xz -C .build/$c; done
cp .build/c5/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c5/flashattn.test
cd flashattn
( time timeout 170 $B -test.run 'TestGPUVarlenDeterministicRepeats|TestGPUVarlenErrors|TestGPUModifiedBackwardKernels|TestGPUBackwardDeterministicRepeats|TestGPUConformanceBackward$/deterministic' -test.count=1 -test.v ) > $OUT/gpu.txt 2>&1 &
( time timeout 170 $B -test.run 'TestGPUConformanceSmem99$/deterministic/.*(256|softcap|window|alibi)' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run 'TestGPUVarlenErrors$' -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
wait
for f in gpu smem99; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/$f.txt | head -20; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt)"; grep -B2 -A6 -- "--- FAIL" $OUT/$f.txt | head -40; done
echo "== memcheck: $(grep -c -- '--- PASS' $OUT/memcheck.txt) subtests pass, $(grep -c -- '--- FAIL' $OUT/memcheck.txt) fail"; tail -3 $OUT/memcheck.txt
xz -9 $OUT/gpu.txt $OUT/smem99.txt $OUT/memcheck.txt
cd ..
for c in c1 c5 c1 c5; do
  G=.build/$c/goflash
  echo "=== $c: dense D256 backward, softcap 30 + window 1024,0, default (gpu-mod) and deterministic (gpu-mod)"
  timeout 30 $G bench --backend gpu --no-report --seqlens 8192 --headdims 256 --causal false --direction bwd --softcap 30 --window 1024,0 --reps 10
  timeout 30 $G bench --backend gpu --no-report --seqlens 8192 --headdims 256 --causal false --direction bwd --softcap 30 --window 1024,0 --reps 10 --deterministic
  echo "=== $c: packed D256 backward, default and deterministic"
  timeout 30 $G bench --varlen 512,8192,1000,3000,4096,2048 --headdims 256 --heads 8 --kv-heads 4 --causal false --direction bwd --reps 10
  timeout 30 $G bench --varlen 512,8192,1000,3000,4096,2048 --headdims 256 --heads 8 --kv-heads 4 --causal false --direction bwd --reps 10 --deterministic
done > $OUT/bench.txt 2>&1
grep -E "^===|  256 " $OUT/bench.txt | head -60
