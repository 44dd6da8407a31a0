#!/usr/bin/env bash
# bwd3 run 1: D64 single-pass candidates (check, bench, sanitizers of the fastest) and the bf16 single pass (Go tests, sanitizers)
set -uo pipefail
B=.build/bwd3; OUT=${OUT:-/tmp/out}
date -u +"run %Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BWD_BENCH=1 BWD_ONLY="tpl80 sm80_d64|kvqsm80_d64" timeout 40 $B/bwd_check internal/kernels > $OUT/bench.log 2>&1; echo "bench rc=$?"
grep bench $OUT/bench.log | sed 's/; fused: dq = convert//'
# fastest fused tile over the four shapes
best=$(grep "^bench kvqsm80_d64" $OUT/bench.log | grep -v _det | python3 -c '
import sys, collections
t = collections.Counter()
for l in sys.stdin:
    f = l.split(); name = f[1].replace("_causal", ""); t[name.split("kvqsm80_d64_")[1]] += float(f[3])
print(min(t, key=t.get)); print(dict(t), file=sys.stderr)')
echo "best=$best"
BWD_ONLY="tpl80 sm80_d64|kvqsm80_d64" timeout 40 $B/bwd_check internal/kernels > $OUT/check.log 2>&1; echo "check rc=$?"
grep -v "^ok " $OUT/check.log | tail -8
for tool in memcheck racecheck; do
  BWD_ONLY="d64_$best|d64_causal_$best" BWD_SHAPES=1,3 timeout 25 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.log 2>&1; echo "$tool $best rc=$?"; tail -2 $OUT/san_$tool.log
done
timeout 80 $B/flashattn.test -test.run 'TestGPUConformanceBF16Backward|TestGPUBackwardPaths|TestBF16|KernelTable' -test.v -test.count=1 > $OUT/gotest.log 2>&1; echo "go test rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|_test.go:[0-9]+:" $OUT/gotest.log | head -30
grep -E "^\s*--- (PASS|SKIP|FAIL)" $OUT/gotest.log | head -30
for tool in memcheck racecheck; do
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUBackwardPaths' -test.count=1 > $OUT/gosan_$tool.log 2>&1; echo "go $tool rc=$?"; tail -3 $OUT/gosan_$tool.log
done
date -u
