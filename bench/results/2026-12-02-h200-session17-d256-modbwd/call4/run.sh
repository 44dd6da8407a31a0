#!/usr/bin/env bash
# Session 17, call 4: ncu of the Hopper forward at N 8192, plain and with softcap 30 (D64, D128): which pipe
# bounds the softcap kernels (XU = MUFU: ex2, tanh; tensor: wgmma). 6087caa's binaries (call 3's).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/f; mkdir -p "$OUT" $B
xz -dc .build/s17/f.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
M=sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
for d in 64 128; do for k in "" _mod_cap; do
  timeout 120 ncu --kernel-name "regex:^fa2_fwd_sm90a_d${d}${k}\$" --launch-count 1 --metrics $M \
    $B/goflash bench --seqlens 8192 --headdims $d --causal false --direction fwd --softcap 30 --reps 1 --warmup 1 --no-report --out /tmp/n$d$k >> "$OUT/ncu.txt" 2>&1
  echo "d$d$k rc=$? ${SECONDS}s"
done; done
grep -E "fa2_fwd_sm90a|pipe_|issue_active|duration" "$OUT/ncu.txt" | head -40
