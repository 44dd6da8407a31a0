#!/usr/bin/env bash
# Session 19, call 6: v8 = the split merge shared by the last merge_ctas CTAs of a group (one level, no tree) +
# acq_rel count-in. A/B (A = orig bc09c3c, B = v1, C = v8) twice; v8's side-by-side table (errors, counters);
# v8's split sweep around the old one-level bound; sanitizers on v8.
set -uo pipefail
OUT=${OUT:-/tmp/out}; D=.build/c6
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
{ PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py --module $D/orig/dec.cubin --ab $D/v1/dec.cubin,$D/v8/dec.cubin 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/ab$r.txt
cat $OUT/ab$r.txt
done
{ PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py --module $D/v8/dec.cubin 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/side.txt
cat $OUT/side.txt
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --module $D/v8/dec.cubin --sanitize 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|Error|done" | tail -3; echo "rc=${PIPESTATUS[0]} $tool $((SECONDS-t0))s"
done > $OUT/san.txt 2>&1
cat $OUT/san.txt
{ PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py --module $D/v8/dec.cubin --sweep-levels 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/levels.txt
cat $OUT/levels.txt
