#!/usr/bin/env bash
# Session 20, call 6 (profile only, no carry): ncu of the shipped decode kernels (fa2_decode_sm80_d64 /
# _d128 from internal/kernels/fa2.fatbin's sm_90 image) and cuDNN's on 32/8 D64 128k and 32/8 D128 64k
# (dev/decode_ncu.py): speed of light, memory workload, warp state, occupancy.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=bench/results/2026-12-02-h200-session20
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 400 ncu --clock-control none --kernel-name regex:'fa2_decode|cudnn_generated|lean_reduction' --launch-skip 2 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
  python3 $R/dev/decode_ncu.py > "$OUT/ncu_full.txt" 2>&1; echo "ncu rc=$? $((SECONDS-t0))s"
grep -vE "Warning|warn\(|scaled_dot|==PROF==|^\s*$|----" "$OUT/ncu_full.txt" | grep -E "^  [a-zA-Z_]|shape|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|L2 Hit|Achieved Occupancy|Stall|Warp Cycles Per Issued|Issued Warp|Grid Size|Block Size|Registers|Shared Memory Config|Dynamic Shared|Waves|Theoretical Occupancy|Mem Busy|Max Bandwidth|L1/TEX Hit|Eligible|Active Warps" | cut -c1-140 > "$OUT/ncu.txt"
cat "$OUT/ncu.txt" | head -150
