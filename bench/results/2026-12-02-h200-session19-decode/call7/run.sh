#!/usr/bin/env bash
# Session 19, call 7: the shared split merge in the fatbin (this tree's internal/kernels, nvcc 11.8) with the
# split rule without its two-level clause: KV-cache Go tests (both paths, the merge shared by several CTAs),
# compute-sanitizer, the decode table beside SDPA, an A/B against the shipped kernels of bc09c3c, goflash bench --decode.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c7; B=/tmp/c7
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
ROOT=$PWD; cd flashattn || exit 9
t0=$SECONDS
timeout 240 $B/flashattn.test -test.run 'KVCache|Decode|PageMultiple' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt
c='TestGPUKVCacheConformance/(path0|path75)-splits(7-merge3|40-merge5)'
{ timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn.test -test.run "$c" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|^(ok|FAIL|PASS)|--- FAIL"; echo "rc=${PIPESTATUS[0]} memcheck $((SECONDS-t0))s"
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUKVCacheConformance/path0-splits40-merge5' -test.count=1 2>&1 | grep -E "RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL"; echo "rc=${PIPESTATUS[0]} racecheck $((SECONDS-t0))s"; } > $OUT/san_go.txt 2>&1
cd $ROOT
{ PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/decode_sidebyside.py 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/side.txt
{ PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/decode_sidebyside.py --ab $S/orig.cubin 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/ab.txt
{ timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --ptx75 --sanitize 2>&1 | grep -E "ERROR SUMMARY|FAIL|Error|done" | tail -3; echo "rc=${PIPESTATUS[0]} ptx75 memcheck $((SECONDS-t0))s"; } > $OUT/san_ptx75.txt 2>&1
run() { local name=$1; shift; timeout 150 $B/goflash bench "$@" --out /tmp/$name > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; mkdir -p $OUT/$name; cp /tmp/$name/*.json /tmp/$name/*.md $OUT/$name/ 2>/dev/null; echo "$name $((SECONDS-t0))s"; }
run bench_decode_32_8 --decode --heads 32 --kv-heads 8 --seqlens 1024,4096,16384,32768,65536,131072 --compare-torch --peak-tbps 4.8
run bench_decode_mqa --decode --heads 8 --kv-heads 1 --seqlens 1024,2048,4096,8192,32768,131072 --compare-torch --peak-tbps 4.8
run bench_decode_d64 --decode --heads 32 --kv-heads 8 --headdims 64 --seqlens 1024,4096,32768,131072 --compare-torch --peak-tbps 4.8
echo "all $((SECONDS-t0))s"
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -20
cat $OUT/san_go.txt $OUT/side.txt $OUT/ab.txt $OUT/san_ptx75.txt
grep -vE "^sdpa \[|^wrote" $OUT/bench_decode_32_8.txt $OUT/bench_decode_mqa.txt $OUT/bench_decode_d64.txt | tail -45
