#!/usr/bin/env bash
# Session 10, call 13 (dev only): the D128 decode tile with a deeper cp.async ring (4 stages, 128 KiB;
# 6 stages, 192 KiB; one CTA per SM) against the shipped 3-stage tile, --sweep-levels. Carry .build/c13.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=.build/c13
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
t0=$SECONDS
PY="python3 kernels/dev/decode_sidebyside.py"
PYTHONUNBUFFERED=1 timeout 100 $PY --sweep-levels > $OUT/levels_shipped.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/levels_shipped.txt
PYTHONUNBUFFERED=1 timeout 100 $PY --module $S/deep4.cubin --tile-smem 131072 --sweep-levels > $OUT/levels_deep4.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/levels_deep4.txt
PYTHONUNBUFFERED=1 timeout 100 $PY --module $S/deep6.cubin --tile-smem 196608 --sweep-levels > $OUT/levels_deep6.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/levels_deep6.txt
for f in shipped deep4 deep6; do echo "== $f"; grep -E "^B1|rc=|FAIL|Error" $OUT/levels_$f.txt | sed -E 's/ \| [0-9*: .]+$//'; done
