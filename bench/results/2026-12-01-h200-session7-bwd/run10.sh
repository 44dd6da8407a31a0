#!/usr/bin/env bash
set -uo pipefail
B=$PWD/.build/s7; mkdir -p $OUT; date -u
(cd internal/cuda && timeout 60 $B/cuda.test -test.run 'TestGPU' -test.v -test.count=1 > $OUT/cuda_test.txt 2>&1; echo "cuda rc=$?"); grep -E "^(--- |PASS|FAIL|ok)" $OUT/cuda_test.txt
(cd flashattn && timeout 120 $B/flashattn.test -test.run 'TestGPUBenchLaunchCost|TestGPUBackwardPaths|TestGPUDecode|TestGPUKVCache' -test.v -test.count=1 > $OUT/go_test.txt 2>&1; echo "go rc=$?"); grep -E "^(--- |PASS|FAIL|ok)|enqueue .* µs" $OUT/go_test.txt | head -20
timeout 100 $B/goflash bench --decode --compare-torch --peak-tbps 4.8 --out $OUT/dec > $OUT/bench_decode.txt 2>&1; echo "dec rc=$?"; grep -A30 "^decode bandwidth" $OUT/bench_decode.txt
timeout 120 $B/goflash bench --seqlens 2048 --headdims 128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_d128.txt 2>&1; echo "fb rc=$?"; grep -A20 "^     dir" $OUT/bench_d128.txt | grep -v "^wrote"
rm -f $OUT/*/bench.html $OUT/*/bench.md $OUT/*/bench.json
