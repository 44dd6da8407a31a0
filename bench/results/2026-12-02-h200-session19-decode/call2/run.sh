#!/usr/bin/env bash
# Session 19, call 2: A = orig (bc09c3c), B = v1 (acq_rel count-in), C = v3 (v1 + one inlined merge for both tree levels + the prologue's issues in a loop: 7308 -> 4636 SASS instructions at D128), twice; sanitizers on v3.
set -uo pipefail
OUT=${OUT:-/tmp/out}; D=.build/c2
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
{ PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py --module $D/orig/dec.cubin --ab $D/v1/dec.cubin,$D/v3/dec.cubin 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/ab$r.txt
cat $OUT/ab$r.txt
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --module $D/v3/dec.cubin --sanitize 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|Error|done" | tail -3; echo "rc=${PIPESTATUS[0]} $tool $((SECONDS-t0))s"
done > $OUT/san.txt 2>&1
cat $OUT/san.txt
