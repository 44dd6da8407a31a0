#!/usr/bin/env bash
# Session 10, call 2: the cluster sweep with one-CTA-per-SM variants and MQA split counts (dev cubin).
set -uo pipefail
OUT=${OUT:-/tmp/out}; M=.build/s10/dec90.cubin
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"
PYTHONUNBUFFERED=1 timeout 400 python3 kernels/dev/decode_sidebyside.py --module $M --clusters > $OUT/clusters.txt 2>&1; echo "rc=$?" >> $OUT/clusters.txt
grep -vE "Warning|warn|scaled_dot" $OUT/clusters.txt
