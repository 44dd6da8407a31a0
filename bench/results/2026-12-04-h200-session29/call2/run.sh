#!/usr/bin/env bash
# Session 29, call 2 (carry .build/s29): decode dev cubins (nvcc 11.8 -arch=sm_90, dec.cu over a copy of kernels/):
# orig = main's decode.cuh (SASS = the fatbin's), a = the contiguous copy without row tests on whole blocks.
# Correctness of a on every bench shape (contiguous, paged), the modifiers, memcheck; then builds x split counts.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=.build/s29; D=kernels/dev/decode_sidebyside.py
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
export PYTHONUNBUFFERED=1
timeout 150 python3 $D --module $S/a.cubin > "$OUT/bench_a.txt" 2>&1; echo "bench rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/bench_a.txt"
timeout 90 python3 $D --module $S/a.cubin --mods > "$OUT/mods_a.txt" 2>&1; echo "mods rc=$? $((SECONDS-t0))s"; grep -E "FAIL|within" "$OUT/mods_a.txt"
timeout 120 compute-sanitizer --tool memcheck python3 $D --module $S/a.cubin --sanitize > "$OUT/san_a.txt" 2>&1; echo "san rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/san_a.txt"
timeout 200 python3 $S/ab_splits.py orig=$S/orig.cubin a=$S/a.cubin > "$OUT/ab.txt" 2>&1; echo "ab rc=$? $((SECONDS-t0))s"; cat "$OUT/ab.txt"
echo "all done $((SECONDS-t0))s"
