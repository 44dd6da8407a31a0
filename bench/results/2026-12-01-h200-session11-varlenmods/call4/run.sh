#!/usr/bin/env bash
# Session 11, call 4: the split rule from call 3's sweep (one CTA per SM on contiguous caches; one
# block of 128 keys may be a split): KV-cache tests, decode tables beside SDPA. Carry .build/c4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c4; B=/tmp/c4
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
ROOT=$PWD; cd flashattn || exit 9
t0=$SECONDS
timeout 200 $B/flashattn.test -test.run 'KVCache|Decode' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt
cd $ROOT
PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py > $OUT/side.txt 2>&1; echo "rc=$?" >> $OUT/side.txt; echo "side $((SECONDS-t0))s"
run() { local name=$1; shift; timeout 150 $B/goflash bench "$@" --out /tmp/$name > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; echo "$name $((SECONDS-t0))s"; }
run bench_decode_32_8 --decode --heads 32 --kv-heads 8 --seqlens 1024,4096,16384,32768,65536,131072 --compare-torch --peak-tbps 4.8
run bench_decode_d64 --decode --heads 32 --kv-heads 8 --headdims 64 --seqlens 1024,2048,4096,32768,131072 --compare-torch --peak-tbps 4.8
echo "all $((SECONDS-t0))s"
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head
grep -vE "Warning|warn\(|scaled_dot" $OUT/side.txt
grep -A12 "decode bandwidth" $OUT/bench_decode_32_8.txt $OUT/bench_decode_d64.txt
