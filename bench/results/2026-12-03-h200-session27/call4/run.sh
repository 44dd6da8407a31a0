#!/usr/bin/env bash
# Session 27, call 4 (carry .build/c3/b.tar.xz, call 3's binaries): ncu on the plain Hopper D128
# kernel and the modified one with a window past every key (no modifier in effect: the modified
# kernel's own cost, 1.10x the plain call's time at N 8192), one launch each.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c4
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 200 ncu --kernel-name regex:'fa2_fwd_sm90a_d128(_mod)?$' --launch-count 4 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats \
  --section LaunchStats --section Occupancy \
  --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_uniform.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  $B/goflash_v5 bench --seqlens 8192 --headdims 128 --causal false --window 32768,-1 --reps 1 --warmup 0 --out /tmp/b > "$OUT/ncu.txt" 2>&1
echo "ncu rc=$? $((SECONDS-t0))s"
grep -E "fa2_fwd|Duration|Throughput|Executed Ipc|Issue Slots|No Eligible|inst_executed|gmma|Warp Cycles Per Issued|Registers Per|Stall" "$OUT/ncu.txt" | head -80
