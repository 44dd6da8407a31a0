#!/bin/bash
# session 24 call 1: D256's packed backward with Options.Deterministic (the base row's ordered twin):
# timing beside the default packed backward, the GPU test set, Smem99, sanitizers
cd "$(dirname "$0")/../../../.."
tar xJf .build/c1/b.tar.xz -C .build/c1 && cp .build/c1/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c1/flashattn.test G=$PWD/.build/c1/goflash
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for det in "" --deterministic; do
  for m in "" "--window 1024,0 --softcap 30"; do
    echo "== bench varlen bwd D256 $det $m"
    timeout 60 $G bench --varlen 512,8192,1000,3000,4096,2048 --headdims 256 --heads 8 --kv-heads 4 --direction bwd --reps 20 $det $m
  done
done > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
R='TestGPUVarlenErrors$|TestGPUConformanceBackward$/deterministic/varlen-.*d256|TestGPUConformanceSmem99$/deterministic/varlen-(d128-gqa3|causal-d128-gqa3|all-mods-causal)-at-D256'
cd flashattn
( time timeout 470 $B -test.run 'GPU|Ladder|Table' -test.skip 'Hopper|Smem99' -test.count=1 -test.v ) > $OUT/gpu.txt 2>&1 &
( time timeout 470 $B -test.run 'TestGPUConformanceSmem99$' -test.count=1 -test.v ) > $OUT/smem99.txt 2>&1 &
( time timeout 470 compute-sanitizer --tool memcheck --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/memcheck.txt 2>&1 &
( time timeout 470 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $B -test.run "$R" -test.count=1 -test.v ) > $OUT/racecheck.txt 2>&1 &
wait
for f in gpu smem99; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/$f.txt | head -20; echo "pass $(grep -c -- '--- PASS' $OUT/$f.txt) fail $(grep -c -- '--- FAIL' $OUT/$f.txt)"; grep -B2 -A6 -- "--- FAIL" $OUT/$f.txt | head -40; done
for f in memcheck racecheck; do echo "== $f: $(grep -c -- '--- PASS' $OUT/$f.txt) subtests pass, $(grep -c -- '--- FAIL' $OUT/$f.txt) fail"; tail -4 $OUT/$f.txt; done
xz -9 $OUT/gpu.txt $OUT/smem99.txt $OUT/memcheck.txt $OUT/racecheck.txt
