#!/usr/bin/env bash
# session 7 call 4: the shipped build (pre zeroes, convert reads, dQ adds between dV and dK): checks, sanitizers, Go tests, harnesses
set -uo pipefail
B=$PWD/.build/s7; mkdir -p $OUT; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 $B/bwd_check internal/kernels > $OUT/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check.log | tail -5
for tool in memcheck racecheck; do
  BWD_ONLY="kvqsm80_d128_large|kvqsm80_d128_causal_large|kvqsm80_d64_causal_large|kvqsm80_d256|tpl80 sm80_d64_causal" BWD_SHAPES=1,3,7 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.txt 2>&1; echo "san $tool rc=$?"; grep -c "^ok " $OUT/san_$tool.txt; tail -2 $OUT/san_$tool.txt
done
(cd flashattn && timeout 300 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.count=1 -test.v > $OUT/gotest.txt 2>&1; echo "go rc=$?")
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" $OUT/gotest.txt | head; echo "pass $(grep -c '^--- PASS' $OUT/gotest.txt) skip $(grep -c '^--- SKIP' $OUT/gotest.txt)"; grep "^--- SKIP" $OUT/gotest.txt
PYTHONUNBUFFERED=1 timeout 120 python3 $B/prof2.py > $OUT/kernel_level.txt 2>&1; echo "prof2 rc=$?"; grep -v Warn $OUT/kernel_level.txt | grep -v warn_once
timeout 260 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "bench rc=$?"
grep -A60 "^goflash bench on" $OUT/bench_fwdbwd.txt | grep -v "^wrote"
rm -f $OUT/fb/bench.html
cd $OUT && tar czf /tmp/o.tgz . && mv /tmp/o.tgz $OUT/all.tgz
