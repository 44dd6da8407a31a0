#!/usr/bin/env bash
# Session 19, call 3 (profile only): globaltimer probe of v1 (acq_rel count-in) with cold / code-warm / warm
# event times beside cuDNN's; ncu launch shapes and durations of cuDNN's decode kernels.
set -uo pipefail
OUT=${OUT:-/tmp/out}; C=.build/c3
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 200 python3 $C/probe.py $C/probe.cubin 2>&1 | grep -vE "Warning|warn|scaled_dot" > $OUT/probe.txt; echo "rc=$? $((SECONDS-t0))s" >> $OUT/probe.txt
cat $OUT/probe.txt
m=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__cluster_dim_x,dram__bytes_read.sum,smsp__inst_executed.sum
timeout 200 ncu --clock-control none --metrics $m python3 $C/cudnn_ncu.py > $OUT/ncu_cudnn.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/ncu_cudnn.txt
grep -vE "Warning|warn\(|scaled_dot|==PROF==" $OUT/ncu_cudnn.txt | grep -E "^  [a-zA-Z_]|shape|duration|grid_size|block_size|registers|shared_mem|cluster|dram|inst_exec|rc=" | cut -c1-150 | tail -120
