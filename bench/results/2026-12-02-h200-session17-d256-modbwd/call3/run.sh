#!/usr/bin/env bash
# Session 17, call 3: goflash bench --dtype bf16 beside PyTorch SDPA in bf16 (7c253b9's binaries, sm_90-only fatbin copy),
# and the bf16 bench tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/f; mkdir -p "$OUT" $B
xz -dc .build/s17/f.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
(cd flashattn && timeout 120 $B/flashattn.test -test.run 'TestBF16Refusals|TestBF16RefusedOnSM75|TestGPUBenchBackward|TestGPUModifiedBackwardKernels' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/tests.txt")
grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^--- (PASS|FAIL|SKIP)" "$OUT/tests.txt" | head -20
timeout 300 $B/goflash bench --dtype bf16 --compare-torch --direction both --seqlens 2048,8192 --headdims 64,128 --causal both --reps 10 --warmup 3 --no-report --out /tmp/bf16 > "$OUT/bench-bf16.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/bench-bf16.txt"
cp /tmp/bf16/bench.json "$OUT/bench-bf16.json"
grep -v "^sdpa \[" "$OUT/bench-bf16.txt" | head -60
