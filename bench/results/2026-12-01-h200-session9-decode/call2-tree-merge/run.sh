#!/usr/bin/env bash
# Session 9, call 2: the tree merge (kMergeFan 16, 8 splits' loads in flight) as a dev build of the
# decode kernels (dec.cu.txt: decode.cuh of this tree, fp16, sm_90 cubin + compute_75 PTX): split
# sweep beside cuDNN, modifiers, sanitizers. From the repo root, carry .build/c2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; C=.build/c2
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
t0=$SECONDS
PY="python3 kernels/dev/decode_sidebyside.py"
( for tool in memcheck racecheck; do san $OUT/san.txt 200 $tool $PY --sanitize --module $C/dec90.cubin; san $OUT/san.txt 200 $tool $PY --sanitize --ptx75 --module $C/dec75.ptx; done ) &
wait
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|sanitize calls done|Error|error" $OUT/san.txt | head -24; echo "san $((SECONDS-t0))s"
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 120 $PY --mods --module $C/dec90.cubin > $OUT/mods.txt 2>&1; echo "rc=$?" >> $OUT/mods.txt; grep -vE "Warning|warn|scaled_dot" $OUT/mods.txt | tail -4; echo "mods $((SECONDS-t0))s"
PYTHONUNBUFFERED=1 timeout 250 $PY --sweep --module $C/dec90.cubin > $OUT/sweep.txt 2>&1; echo "rc=$?" >> $OUT/sweep.txt; grep -vE "Warning|warn|scaled_dot" $OUT/sweep.txt; echo "sweep $((SECONDS-t0))s"
