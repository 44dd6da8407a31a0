#!/bin/bash
# session 24 call 4: every D256 modified single pass reading the packed sequence's fields where used, so
# the large ordered twin takes packed sequences too: the GPU tests that run the changed kernels, then
# old (.build/c1, this session's first build) and new (.build/c4) goflash on them, interleaved
cd "$(dirname "$0")/../../../.."
for c in c1 c4; do tar xJf .build/$c/b.tar.xz -C .build/$c; done
cp .build/c4/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c4/flashattn.test
R='TestGPUVarlenErrors$|TestGPUConformanceBackward$/deterministic/varlen-.*d256|TestGPUConformanceSmem99$/deterministic/varlen-(d128-gqa3|causal-d128-gqa3|all-mods-causal)-at-D256'
cd flashattn
( time timeout 380 $B -test.run 'TestGPUVarlen|TestGPUConformanceBackward|TestGPUBackward|TestGPUModified|TestGPUConformanceBF16|TestGPUBF16' -test.skip 'Hopper' -test.count=1 -test.v ) > $OUT/gpu.txt 2>&1 &
( time timeout 380 $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout 380 compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
wait
for f in gpu smem99; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/$f.txt | head -20; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt)"; grep -B2 -A6 -- "--- FAIL" $OUT/$f.txt | head -40; done
echo "== memcheck: $(grep -c -- '--- PASS' $OUT/memcheck.txt) subtests pass, $(grep -c -- '--- FAIL' $OUT/memcheck.txt) fail"; tail -4 $OUT/memcheck.txt
grep -E "^--- " $OUT/gpu.txt | awk '{print $2, $3, $4}' | tr '\n' ' '; echo
xz -9 $OUT/gpu.txt $OUT/smem99.txt $OUT/memcheck.txt
cd ..
for c in c1 c4 c1 c4; do
  G=.build/$c/goflash
  echo "=== $c: dense D256 backward, softcap 30 + window 1024,0 (GPU-mod line), default and deterministic"
  timeout 40 $G bench --backend gpu --no-report --seqlens 8192 --headdims 256 --causal false --direction bwd --softcap 30 --window 1024,0 --reps 10
  timeout 40 $G bench --backend gpu --no-report --seqlens 8192 --headdims 256 --causal false --direction bwd --softcap 30 --window 1024,0 --reps 10 --deterministic
  echo "=== $c: packed D256 backward, default and deterministic"
  timeout 40 $G bench --varlen 512,8192,1000,3000,4096,2048 --headdims 256 --heads 8 --kv-heads 4 --causal false --direction bwd --reps 10
  timeout 40 $G bench --varlen 512,8192,1000,3000,4096,2048 --headdims 256 --heads 8 --kv-heads 4 --causal false --direction bwd --reps 10 --deterministic
done > $OUT/bench.txt 2>&1
grep -E "^===|  256 |GPU" $OUT/bench.txt | head -80
