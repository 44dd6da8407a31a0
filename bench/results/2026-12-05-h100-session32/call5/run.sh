#!/usr/bin/env bash
# Session 32, call 5 (kind nvidia-h100-x1; carry .build/s32: b64s6.cubin and b64s4.cubin, dev/dec64.cu.txt
# built by nvcc 11.8 -O3 -std=c++17 -arch=sm_90 -cubin -x cu -I kernels with -DBC=64 -DWARPS=4 -DSTAGES=6 / 4;
# 0 spills). D64 decode with 64-key blocks (16 keys per warp, as the D128 row) in a 6- or 4-deep ring,
# against the shipped 128-key, 3-stage row; then b64s6's outputs against float32 math on every bench shape.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; S=.build/s32; D=bench/results/2026-12-05-h100-session32/dev
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
export PYTHONUNBUFFERED=1
timeout 150 python3 $D/ab64.py $S/b64s6.cubin $S/b64s4.cubin 2>&1 | grep -v -E "UserWarning|scaled_dot_product" | tee "$OUT/ab.txt"
echo "ab $((SECONDS-t0))s"
timeout 100 python3 kernels/dev/decode_sidebyside.py --module $S/b64s6.cubin 2>&1 | grep -v -E "UserWarning|scaled_dot_product" > "$OUT/bench_b64s6.txt"
echo "bench rc=$? $((SECONDS-t0))s"; grep -E -i "fail|error|D64|within" "$OUT/bench_b64s6.txt" | head -20
