#!/usr/bin/env bash
# Session 10, call 14 (profile only): where a short decode call's time goes. ncu on the first decode
# kernel of decode_sidebyside.py (B 1, 32/8 heads, D 128, 1k entries, 8 splits; ncu flushes the caches).
set -uo pipefail
OUT=${OUT:-/tmp/out}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
m='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,sm__cycles_active.avg,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,smsp__cycles_active.avg'
timeout 200 ncu --kernel-name fa2_decode_sm80_d128 --launch-skip 2 --launch-count 1 --metrics "$m" \
  python3 kernels/dev/decode_sidebyside.py > "$OUT/ncu_decode_1k.txt" 2>&1; echo "rc=$? $((SECONDS-t0))s" >> "$OUT/ncu_decode_1k.txt"
grep -vE "^==PROF==|Warning|warn\(|scaled_dot" "$OUT/ncu_decode_1k.txt" | grep -E "stalled|duration|cycles|inst_executed|warps_active|dram|rc=" | sort -t' ' -k3 | head -40
