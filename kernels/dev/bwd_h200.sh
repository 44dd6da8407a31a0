#!/usr/bin/env bash
# One H200 session for the backward (run through the device tool from the repo
# root, carrying .build/bwd built here with nvcc 11.8 and Go):
#   nvcc -O3 -std=c++17 -arch=sm_90 kernels/dev/bwd_check.cu -o .build/bwd/bwd_check -ldl
#   CGO_ENABLED=0 go test -c -o .build/bwd/flashattn.test ./flashattn
# 1. bwd_check: float64 CPU reference on small odd shapes, every variant (tpl75, tpl80, ptx75);
# 2. the Go GPU tests: conformance forward+backward (default and forced sm_75 paths),
#    Device API errors, memory, BenchBackward; Go benchmarks on 8 paper shapes;
# 3. sidebyside.py --bwd: our backward vs PyTorch SDPA flash/efficient backward, one process.
# Logs go to $OUT; the summary is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
date -u +"run %Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 .build/bwd/bwd_check internal/kernels >"$OUT/bwd_check.log" 2>&1; echo "bwd_check rc=$?"
timeout 150 .build/bwd/flashattn.test -test.run 'TestGPU|KernelTable' -test.v -test.count=1 >"$OUT/gotest.log" 2>&1; echo "go test rc=$?"
timeout 40 .build/bwd/flashattn.test -test.run '^$' -test.bench 'GPU(Forward|Backward)Paper$/D(64|128)/N(2048|8192)' \
  -test.benchtime=10x >"$OUT/gobench.log" 2>&1; echo "go bench rc=$?"
PYTHONUNBUFFERED=1 timeout 120 python3 kernels/dev/sidebyside.py --bwd >"$OUT/bwd_sidebyside.log" 2>&1; echo "sidebyside rc=$?"
echo "== bwd_check"; grep -v "^ok " "$OUT/bwd_check.log" | head -40
echo "== go test"; grep -E "^(=== RUN|--- FAIL|FAIL|ok|PASS|panic)|_test.go:[0-9]+:" "$OUT/gotest.log" | grep -v "=== RUN" | head -60
grep -E "^--- (PASS|SKIP): TestGPU" "$OUT/gotest.log"
echo "== go bench"; grep -E "Paper|FAIL|ok" "$OUT/gobench.log"
echo "== sidebyside"; cat "$OUT/bwd_sidebyside.log"
