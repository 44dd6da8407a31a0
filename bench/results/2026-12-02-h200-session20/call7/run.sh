#!/usr/bin/env bash
# Session 20, call 7 (no carry): split counts on long caches with the shipped fatbin (dev/splits_long.py),
# after call 6's ncu: cuDNN's D64 kernel runs 2 CTAs per SM (256) at 88% of DRAM, ours 1 (128) at 74%.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=bench/results/2026-12-02-h200-session20
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 150 python3 $R/dev/splits_long.py 2>&1 | grep -v -i "warn\|return F" | tee "$OUT/splits.txt"
echo "done $((SECONDS-t0))s"
