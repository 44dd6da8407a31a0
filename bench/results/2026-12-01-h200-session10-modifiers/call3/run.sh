#!/usr/bin/env bash
# Session 10, call 3: softcap with 1/c folded into Q (mode 1) and f16x2 tanh (mode 2) vs shipped (mode 0); dev cubins, sm_90.
set -uo pipefail
OUT=${OUT:-/tmp/out}; cd .build/s10/cap
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
timeout 150 python3 cap_sweep.py 0 1 2 > $OUT/cap_sweep.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/cap_sweep.txt; cat $OUT/cap_sweep.txt
t0=$SECONDS
for k in plain64 modonly64 alibi64 cap64; do
  timeout 60 ncu --kernel-name $k --launch-skip 2 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats --section SchedulerStats --section Occupancy python3 cap_sweep.py 0 > $OUT/ncu_$k.txt 2>&1
done
echo "ncu $((SECONDS-t0))s"
for k in plain64 modonly64 alibi64 cap64; do echo "== $k"; grep -E "Duration|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|Executed Instructions  |Pipe|Theoretical Occ|Achieved Occ" $OUT/ncu_$k.txt | head -30; done
