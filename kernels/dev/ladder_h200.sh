#!/usr/bin/env bash
# ladder_h200.sh: one GPU session for the kernel ladder (tutorial chapter 6), run
# from the repository root: check rungs 1-4 against the CPU reference (as
# compiled into the harness, from the fatbin Go embeds, and from the sm_75 PTX
# through the driver's JIT), time rungs 1-5 at the FA2 paper's shape (16k
# tokens, hidden 2048, D 64; rung 5 = the shipped kernel of each path), then
# compute-sanitizer memcheck and racecheck over the rung checks. Logs go to $OUT.
#   HARNESS=path: a fwd_check binary built elsewhere (e.g. by nvcc 11.8:
#   nvcc -O3 -std=c++17 -arch=sm_90 kernels/dev/fwd_check.cu -o .build/fwd_check -ldl);
#   KERNELS=dir: where fa2.fatbin and fa2_sm75.fatbin are (default internal/kernels).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" .build/kdev
export OUT
date -u +"run %Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
h=${HARNESS:-}
if [ -z "$h" ]; then
  nvcc --version | tail -1
  nvcc -O3 -std=c++17 -arch=sm_90 kernels/dev/fwd_check.cu -o .build/kdev/fwd_check -ldl 2>&1 | grep -v Wno-deprecated
  h=.build/kdev/fwd_check
fi
k=${KERNELS:-internal/kernels}
"$h" ladder "$k" 2>&1 | tee "$OUT/ladder.log"
for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool, rung checks (tpl)"
  OUT= compute-sanitizer --tool "$tool" "$h" ladder-check "$k" 2>&1 | tail -4 | tee "$OUT/ladder_$tool.log"
done
