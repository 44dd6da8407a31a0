#!/usr/bin/env bash
# Session 10, call 1: the sm_90 cluster merge (dev cubin .build/s10/dec90.cubin of decode.cuh): sanitizers, cluster sweep.
set -uo pipefail
OUT=${OUT:-/tmp/out}; M=.build/s10/dec90.cubin
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
PY="python3 kernels/dev/decode_sidebyside.py --module $M"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
t0=$SECONDS
( for tool in memcheck racecheck synccheck; do san $OUT/san.txt 150 $tool $PY --sanitize; done ) &
PYTHONUNBUFFERED=1 timeout 330 $PY --clusters > $OUT/clusters.txt 2>&1; echo "rc=$?" >> $OUT/clusters.txt
grep -vE "Warning|warn|scaled_dot" $OUT/clusters.txt; echo "clusters $((SECONDS-t0))s"
wait
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|sanitize calls done|Error|error" $OUT/san.txt | head -24
echo "all $((SECONDS-t0))s"
