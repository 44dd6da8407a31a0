#!/usr/bin/env bash
# Session 19, call 8: KV-cache Go tests with a D256 decode case (test binary of this tree); dev, nothing of it ships yet: split counts for few kv heads with one-block splits
# allowed (shipped fatbin of e2028f3); D64 decode tiles, 8 warps or 4 stages (dev cubins, nvcc 11.8 sm_90).
set -uo pipefail
OUT=${OUT:-/tmp/out}; D=.build/c8
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
mkdir -p /tmp/c8; [ -x /tmp/c8/flashattn.test ] || { xz -dc $D/t.xz > /tmp/c8/flashattn.test; chmod +x /tmp/c8/flashattn.test; }
(cd flashattn && timeout 150 /tmp/c8/flashattn.test -test.run 'KVCache|Decode' -test.count=1 -test.v > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt)
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|d256" $OUT/tests.txt | grep -v "=== RUN" | head -30
{ PYTHONUNBUFFERED=1 timeout 150 python3 $D/dev8.py B 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/tiles.txt
cat $OUT/tiles.txt
{ PYTHONUNBUFFERED=1 timeout 200 python3 $D/dev8.py A 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/sweep.txt
cat $OUT/sweep.txt
