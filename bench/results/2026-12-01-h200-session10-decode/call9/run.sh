#!/usr/bin/env bash
# Session 10, call 9: one merge level or two for few kv heads on short caches (decode_sidebyside.py --sweep-levels), shipped fatbin.
set -uo pipefail
OUT=${OUT:-/tmp/out}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 300 python3 kernels/dev/decode_sidebyside.py --sweep-levels > $OUT/sweep_levels.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/sweep_levels.txt
grep -vE "Warning|warn\(|scaled_dot" $OUT/sweep_levels.txt
