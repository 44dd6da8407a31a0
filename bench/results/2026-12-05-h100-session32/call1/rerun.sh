#!/usr/bin/env bash
# Session 32, call 1's read floor again on the same warm H100 (run.sh's nvcc step had failed on
# readfloor_tma.cu's min<long long>; dev/readfloor_tma.cu.txt is the fixed form). From the repository root.
B=/tmp/c1; D=bench/results/2026-12-05-h100-session32/dev; mkdir -p $B
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
nvcc -O3 -arch=sm_90 -cubin -o $B/regs.cubin bench/results/2026-12-02-h200-session20/dev/readfloor.cu &&
  nvcc -O3 -arch=sm_90 -cubin -x cu -o $B/bulk.cubin $D/readfloor_tma.cu.txt &&
  timeout 300 env PYTHONUNBUFFERED=1 python3 $D/readfloor_tma.py $B/regs.cubin $B/bulk.cubin 2>&1 | tee "$OUT/readfloor.txt"
