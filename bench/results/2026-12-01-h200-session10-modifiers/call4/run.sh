#!/usr/bin/env bash
# Session 10, call 4: other D64 tiles for the softcap/ALiBi kernels (dev cubin .build/s10/cap/tiles.cubin, sm_90).
set -uo pipefail
OUT=${OUT:-/tmp/out}; cd .build/s10/cap
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
timeout 200 python3 tile_sweep.py 0 1 2 3 > $OUT/tile_sweep.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tile_sweep.txt; cat $OUT/tile_sweep.txt
