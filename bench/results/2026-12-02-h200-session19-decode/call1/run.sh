#!/usr/bin/env bash
# Session 19, call 1: decode count-in and merge variants (dev cubins, nvcc 11.8 sm_90), A/B beside cuDNN, sanitizers.
# A = orig (decode.cuh of bc09c3c), B = v1 (one acq_rel count-in per CTA), C = v2 (v1 + 16 merge loads in flight).
set -uo pipefail
OUT=${OUT:-/tmp/out}; D=.build/c1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
{ PYTHONUNBUFFERED=1 timeout 240 python3 kernels/dev/decode_sidebyside.py --module $D/orig/dec.cubin --ab $D/v1/dec.cubin,$D/v2/dec.cubin 2>&1 | grep -v -i warn; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/ab.txt
cat $OUT/ab.txt
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --module $D/v2/dec.cubin --sanitize 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|Error|done" | tail -3; echo "rc=${PIPESTATUS[0]} $tool $((SECONDS-t0))s"
done > $OUT/san.txt 2>&1
cat $OUT/san.txt
{ PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py --module $D/v2/dec.cubin --sweep-levels 2>&1 | grep -v -i warn; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/levels.txt
cat $OUT/levels.txt
