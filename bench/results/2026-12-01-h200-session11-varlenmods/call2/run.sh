#!/usr/bin/env bash
# Session 11, call 2: the decode prologue change in the shipped fatbin (and packed sequences with modifiers):
# Go GPU tests, compute-sanitizer on decode, decode tables beside SDPA (L2 flushed), varlen benches. Carry .build/c2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c2; B=/tmp/c2
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
ROOT=$PWD; cd flashattn || exit 9
t0=$SECONDS
timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen|ScoreMods' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt
san() { timeout 150 compute-sanitizer --tool "$1" --error-exitcode 9 $B/flashattn.test -test.run "$2" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" ; echo "rc=${PIPESTATUS[0]} ($1 $2)"; }
{ san memcheck 'TestGPUKVCache(Conformance|Device|BF16|AppendDevice)$'; san racecheck 'TestGPUKVCache(Conformance|Device)$'; } > $OUT/san.txt 2>&1
cd $ROOT
echo "tests+san $((SECONDS-t0))s"
PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py > $OUT/side.txt 2>&1; echo "rc=$?" >> $OUT/side.txt; echo "side $((SECONDS-t0))s"
run() { local name=$1; shift; timeout 150 $B/goflash bench "$@" --out /tmp/$name > $OUT/$name.txt 2>&1; echo "rc=$?" >> $OUT/$name.txt; mkdir -p $OUT/$name; cp /tmp/$name/*.json /tmp/$name/*.md $OUT/$name/ 2>/dev/null; echo "$name $((SECONDS-t0))s"; }
run bench_decode_mqa --decode --heads 8 --kv-heads 1 --seqlens 1024,2048,4096,8192,32768 --compare-torch --peak-tbps 4.8
run bench_decode_32_8 --decode --heads 32 --kv-heads 8 --seqlens 1024,4096,16384,32768,65536,131072 --compare-torch --peak-tbps 4.8
{ for m in "" "--softcap 30" "--window 256,0" "--alibi"; do echo "== varlen $m"; timeout 60 $B/goflash bench --varlen 512,8192,1000,3000,77,4096 --headdims 64,128 --causal both --reps 10 --warmup 3 $m 2>&1 | grep -vi warn; done; } > $OUT/varlen.txt 2>&1
echo "all $((SECONDS-t0))s"
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL" $OUT/tests.txt | head -30
cat $OUT/san.txt
grep -vE "Warning|warn\(|scaled_dot" $OUT/side.txt
grep -vE "^sdpa \[|^wrote" $OUT/bench_decode_mqa.txt $OUT/bench_decode_32_8.txt | tail -30
grep -vE "^$|^wrote" $OUT/varlen.txt | head -60
