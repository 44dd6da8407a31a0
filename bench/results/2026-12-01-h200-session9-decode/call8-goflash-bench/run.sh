#!/usr/bin/env bash
# Session 9, call 8: `goflash bench --decode` of the final build beside SDPA (bench/sdpa.py),
# the Go harness (warm L2, both sides' host enqueue outside the timed span). Carry .build/c8.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c8; B=/tmp/c8
mkdir -p "$OUT" $B; [ -x $B/goflash ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
run() { local name=$1; shift; timeout 150 $B/goflash bench "$@" --out /tmp/$name > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; mkdir -p $OUT/$name; cp /tmp/$name/*.json /tmp/$name/*.md $OUT/$name/ 2>/dev/null; grep -vE "^sdpa \[" $OUT/$name.txt | tail -22; echo "$name $((SECONDS-t0))s"; }
run bench_decode --decode --compare-torch --peak-tbps 4.8
run bench_decode_mqa --decode --heads 8 --kv-heads 1 --compare-torch --peak-tbps 4.8
run bench_decode_mods --decode --seqlens 4096,32768,131072 --window 4096,-1 --softcap 50 --alibi --peak-tbps 4.8
