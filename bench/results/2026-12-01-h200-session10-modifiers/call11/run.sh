#!/usr/bin/env bash
# Session 10, call 11: the score transform outside the mask branch (unpeeled D128 kernels), dev cubin cap9 vs HEAD's code (cap1 = c70089b).
set -uo pipefail
OUT=${OUT:-/tmp/out}; cd .build/s10/cap
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
timeout 150 python3 peel_sweep.py 1 9 > $OUT/hoist_sweep.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/hoist_sweep.txt
timeout 150 python3 peel_sweep.py 9 1 > $OUT/hoist_sweep_rev.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/hoist_sweep_rev.txt
grep -E "BAD|^N |rc=" $OUT/hoist_sweep.txt; grep -E "BAD|^N |rc=" $OUT/hoist_sweep_rev.txt; grep -c "^check" $OUT/hoist_sweep.txt
