#!/usr/bin/env bash
# One H200 session (run through the device tool from the repo root): build the
# harness with the machine's nvcc, check every variant, tune, benchmark, and time
# our shipped fatbin against PyTorch SDPA in one process (sidebyside.py). Logs go to $OUT.
# Optional: .build/kdev/fwd_check_nv118 (the same harness built by nvcc 11.8 here).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" .build/kdev
export OUT
date -u +"run %Y-%m-%dT%H:%M:%SZ"; git log -1 --format="commit %H" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1
mode=${1:-all}
t0=$(date +%s)
tune=; [ "${TUNE:-1}" = 1 ] && tune=-DFA2_TUNE  # TUNE=0: shipped variants only
nvcc -O3 -std=c++17 -arch=sm_90 $tune kernels/dev/fwd_check.cu -o .build/kdev/fwd_check -ldl 2>&1 | grep -v Wno-deprecated
echo "nvcc 13 build: $(( $(date +%s) - t0 )) s"
.build/kdev/fwd_check "$mode" internal/kernels 2>&1 | tee "$OUT/fwd_check.log"
if [ -x .build/kdev/fwd_check_nv118 ] && [ "${NV118:-1}" = 1 ]; then
  echo "== harness built by nvcc 11.8 (tpl kernels = 11.8 SASS)"
  OUT= .build/kdev/fwd_check_nv118 quick internal/kernels 2>&1 | tee "$OUT/fwd_nv118.log"
fi
if [ "${SDPA:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 python3 kernels/dev/sidebyside.py 2>&1 | tee "$OUT/sidebyside.log"
  PYTHONUNBUFFERED=1 python3 kernels/dev/sidebyside.py --ptx75 2048 8192 2>&1 | tee "$OUT/sidebyside_ptx75.log"
fi
