#!/usr/bin/env bash
# Session 10, call 6: the modified forward's clean blocks in a loop of their own (walk_blocks), dev cubin cap9 (peel2: the peeling rule, ALiBi crossing blocks masked) vs shipped code cap0.
set -uo pipefail
OUT=${OUT:-/tmp/out}; cd .build/s10/cap
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
timeout 150 python3 peel_sweep.py 0 9 > $OUT/peel2_sweep.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/peel2_sweep.txt
timeout 150 python3 peel_sweep.py 9 0 > $OUT/peel2_sweep_rev.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/peel2_sweep_rev.txt
cat $OUT/peel2_sweep.txt; grep "^N " $OUT/peel2_sweep_rev.txt
