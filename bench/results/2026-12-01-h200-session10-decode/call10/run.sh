#!/usr/bin/env bash
# Session 10, call 10: the decode split rule with its one-merge-level bound (few kv heads, 3k-4k caches):
# goflash bench --decode beside SDPA, and decode_sidebyside.py (L2 flushed). From the repo root, carry .build/c10.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c10; B=/tmp/c10
mkdir -p "$OUT" $B; [ -x $B/goflash ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
run() { local name=$1; shift; timeout 150 $B/goflash bench "$@" --out /tmp/$name > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; mkdir -p $OUT/$name; cp /tmp/$name/*.json /tmp/$name/*.md $OUT/$name/ 2>/dev/null; grep -vE "^sdpa \[" $OUT/$name.txt | tail -16; echo "$name $((SECONDS-t0))s"; }
run bench_decode_mqa --decode --heads 8 --kv-heads 1 --seqlens 2048,3072,4096,6144,8192 --compare-torch --peak-tbps 4.8
run bench_decode_16_2 --decode --heads 16 --kv-heads 2 --seqlens 3072,4096,8192 --compare-torch --peak-tbps 4.8
PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py > $OUT/side.txt 2>&1; echo "rc=$?" >> $OUT/side.txt; grep -vE "Warning|warn\(|scaled_dot" $OUT/side.txt; echo "side $((SECONDS-t0))s"
