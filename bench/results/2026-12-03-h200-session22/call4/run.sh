#!/usr/bin/env bash
# Session 22, call 4 (carry .build/c3/b.tar.xz, call 3's binaries, and .build/c4/qr_sm75.fatbin):
# 1. kernels/dev/sidebyside.py --ptx75 d128 d256: the Turing forwards from this tree's fa2_sm75.fatbin
#    beside SDPA flash / efficient in one process, and as B the candidate `qr` (call4/qr.diff: Q^T's
#    B fragments held in 32 registers for the whole loop instead of 8 ldmatrix.x4 per block; 243-250
#    registers, 0 spills, nvcc 11.8), built as fa2_sm75.fatbin is (compute_75 PTX, -DQR);
# 2. Nsight Compute on fa2_fwd_sm75_d128 (m16, Br 128) and fa2_fwd_sm75_d256 (n8, Br 64), from their PTX,
#    B 4, H 2048/D, N 4096, not causal; one launch each.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
FA2_FATBIN_B=.build/c4/qr_sm75.fatbin timeout 200 python3 kernels/dev/sidebyside.py --ptx75 d128 d256 1024 4096 16384 > "$OUT/sidebyside.txt" 2>&1
echo "sidebyside rc=$? $((SECONDS-t0))s"; grep -v Warning "$OUT/sidebyside.txt" | head -20
for d in 128 256; do
  timeout 120 ncu --kernel-name "fa2_fwd_sm75_d$d" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section Occupancy --section InstructionStats \
    $B/goflash bench --backend gpu --force-arch 75 --headdims $d --seqlens 4096 --causal false --reps 2 --warmup 1 --no-report \
    > "$OUT/ncu_d$d.txt" 2>&1
  echo "ncu d$d rc=$? $((SECONDS-t0))s"
done
for d in 128 256; do grep -E "fa2_fwd|Duration|Compute \(SM\) Throughput|Memory Throughput|Shared|Tensor|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|Registers Per|Achieved Occupancy|Bank" "$OUT/ncu_d$d.txt" | head -30; done
