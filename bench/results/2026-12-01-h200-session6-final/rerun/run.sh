#!/usr/bin/env bash
# Session 6: the tests that failed in the final run, after their fix (raw backward refuses modifiers; tests follow the D64 single pass).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; xz -dc .build/final2/flashattn.test.xz > /tmp/f2.test && chmod +x /tmp/f2.test
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/gpu.txt
cd flashattn && timeout 300 /tmp/f2.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -20
