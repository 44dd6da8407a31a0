#!/usr/bin/env bash
# One H200 session for the backward, run through the device tool from the root
# of a checkout that is not this branch, carrying .build/bwd built here:
#   nvcc -O3 -std=c++17 -arch=sm_90 kernels/dev/bwd_check.cu -o .build/bwd/bwd_check -ldl
#   CGO_ENABLED=0 go test -c -o .build/bwd/flashattn.test ./flashattn
#   .build/bwd/root/: internal/kernels/{fa2.fatbin,fa2_sm75.fatbin,resources.md} and
#   kernels/dev/sidebyside.py of this branch (the shipped build, nvcc 11.8)
# Steps (STEPS, default all): check = bwd_check (float64 CPU reference, every variant)
# and compute-sanitizer memcheck/racecheck of the variants named by SAN_ONLY (default
# "kvqsm80": the single pass, causal and not; BWD_ONLY syntax, a|b); bench = BWD_BENCH per-kernel timings; go = the Go GPU
# tests (conformance on the default and forced sm_75 paths); side = sidebyside.py --bwd $SIDE_ARGS (e.g. "2048 8192 d256")
# (beside PyTorch SDPA; both backward paths); ncu = one profile of the single pass (NCU_KERNEL=dkdv:
# the three-kernel dK/dV kernel; D in NCU_DS, default 128; N 2048). Logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-check bench go side ncu}
B=${B:-.build/bwd}
date -u +"run %Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has check; then
  timeout 120 $B/bwd_check $B/root/internal/kernels >"$OUT/bwd_check.log" 2>&1; echo "bwd_check rc=$?"
  for tool in ${SAN_TOOLS-memcheck racecheck}; do
    BWD_ONLY="${SAN_ONLY:-kvqsm80}" BWD_SHAPES=${SAN_SHAPES:-1,3,7} timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check \
      $B/root/internal/kernels >"$OUT/sanitizer_$tool.log" 2>&1; echo "sanitizer $tool rc=$?"
  done
  grep -v "^ok " "$OUT/bwd_check.log" | head -40; tail -4 "$OUT"/sanitizer_*.log
fi
if has bench; then BWD_BENCH=1 timeout 60 $B/bwd_check $B/root/internal/kernels 2>&1 | tee "$OUT/bench.log" | grep bench; fi
if has go; then
  timeout ${GO_TIMEOUT:-240} $B/flashattn.test -test.run 'TestGPU|KernelTable' -test.v -test.count=1 >"$OUT/gotest.log" 2>&1; echo "go test rc=$?"
  grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|_test.go:[0-9]+:" "$OUT/gotest.log" | head -40
  grep -E "^--- (PASS|SKIP|FAIL): TestGPU" "$OUT/gotest.log"
fi
if has side; then
  (cd $B/root && PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/sidebyside.py --bwd ${SIDE_ARGS-}) >"$OUT/bwd_sidebyside.log" 2>&1
  echo "sidebyside rc=$?"; cat "$OUT/bwd_sidebyside.log"
fi
if has ncu; then
  for d in ${NCU_DS:-128}; do
    BWD_BENCH=1 timeout 100 ncu -k regex:"fa2_bwd_${NCU_KERNEL:-dkdvq}_sm80_d${d}\$" -s 23 -c 1 --set full -o "$OUT/dkdv_d$d" \
      $B/bwd_check $B/root/internal/kernels >"$OUT/ncu_d$d.log" 2>&1; echo "ncu d$d rc=$?"
    ncu -i "$OUT/dkdv_d$d.ncu-rep" --page details >"$OUT/ncu_d$d.txt" 2>&1
    ncu -i "$OUT/dkdv_d$d.ncu-rep" --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
want = ("gpu__time_duration.sum", "launch__registers_per_thread", "launch__occupancy_limit", "sm__warps_active.avg.pct_of_peak",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct", "sm__inst_executed_pipe_tensor", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared", "smsp__pcsamp_warps_issue_stalled", "sm__throughput.avg.pct", "lts__t_sectors_op_red",
        "local_", "smsp__warp_issue_stalled")
for n, u, v in zip(rows[0], rows[1], rows[2]):
    if any(w in n for w in want): print(n, u, v)' >"$OUT/ncu_d${d}_raw.txt" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Bank|Issue Slots Busy|Block Limit|Local" "$OUT/ncu_d$d.txt" | head -30
  done
fi
