#!/usr/bin/env bash
# Session 9, call 6: %globaltimer probes of three dev builds of the decode kernel (probe_*.cubin:
# the merge loading 8 splits before using any; + the length from the parameters (uniform_len);
# + Q loaded after the first blocks are issued), and the new merge A/B against the shipped build.
set -uo pipefail
OUT=${OUT:-/tmp/out}; C=.build/c5
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
for v in base ul ulq; do
PYTHONUNBUFFERED=1 timeout 100 python3 $C/probe.py $C/probe_$v.cubin > $OUT/probe_$v.txt 2>&1; echo "rc=$?" >> $OUT/probe_$v.txt; grep -vE "Warning|warn|scaled_dot" $OUT/probe_$v.txt; echo "probe $v $((SECONDS-t0))s"
done
PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/decode_sidebyside.py --ab $C/dec90_new.cubin > $OUT/ab_merge_loads.txt 2>&1; echo "rc=$?" >> $OUT/ab_merge_loads.txt; grep -vE "Warning|warn|scaled_dot" $OUT/ab_merge_loads.txt; echo "ab $((SECONDS-t0))s"
