#!/usr/bin/env bash
# Session 19, call 5 (profile only): fine globaltimer stamps (epilogue and merge phases) of v1, of v6 (v1 with
# decode_merge __noinline__, one code copy) and v7 (v6 + a dry merge at the kernel's start that warms the merge's
# code in the SM's instruction caches) - is the merge's time instruction fetch?
set -uo pipefail
OUT=${OUT:-/tmp/out}; D=.build/c5
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
for v in p1 p6 p7 p1 p6 p7; do
echo "== $v"; PYTHONUNBUFFERED=1 timeout 100 python3 $D/probe.py $D/$v.cubin --fine 2>&1 | grep -vE "Warning|warn|scaled_dot"; echo "rc=$? $((SECONDS-t0))s"
done > $OUT/probe.txt
cat $OUT/probe.txt
