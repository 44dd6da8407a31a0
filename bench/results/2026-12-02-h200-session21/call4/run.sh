#!/usr/bin/env bash
# Session 21, call 4 (carry .build/c4/b.tar.xz): the decode kernels' K/V copies with an L2 prefetch
# hint (cp.async ... .L2::128B / .L2::256B: dev/p128.diff, dev/p256.diff) against this commit's
# (main.cubin, dev/dec.cu.txt's entry over kernels/), interleaved beside cuDNN.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c4; D=kernels/dev/decode_sidebyside.py
mkdir -p "$OUT" $B; xz -dc .build/c4/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 300 python3 $D --module $B/main.cubin --ab $B/p128.cubin,$B/p256.cubin 2>&1 | grep -v "Warning\|return F" > "$OUT/ab_l2.txt"; echo "ab rc=$? $((SECONDS-t0))s"; cat "$OUT/ab_l2.txt"
