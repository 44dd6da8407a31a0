#!/usr/bin/env bash
# session 8 call 4: Go GPU tests and goflash bench (fwd, bwd with its deterministic line, fwd+bwd) beside PyTorch
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.build/s8; date -u
(cd flashattn && timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.count=1 -test.v > $OUT/gotest.txt 2>&1; echo "go rc=$?")
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" $OUT/gotest.txt | head; echo "pass $(grep -c '^--- PASS' $OUT/gotest.txt) skip $(grep -c '^--- SKIP' $OUT/gotest.txt)"; grep "^--- SKIP" $OUT/gotest.txt
date -u
timeout 240 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "bench rc=$?"
grep -A70 "^goflash bench on" $OUT/bench_fwdbwd.txt | grep -v "^wrote"
rm -f $OUT/fb/bench.html; date -u
