#!/usr/bin/env bash
# Session 11, call 3: the final fatbin (the Turing decode kernel loads Q first again): Go GPU tests
# (both paths, the sm_75 one from the new PTX), compute-sanitizer on decode's forced sm_75 path,
# goflash bench --varlen --window (the flag now parsed on that path), the decode split sweep. Carry .build/c3.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c3; B=/tmp/c3
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
ROOT=$PWD; cd flashattn || exit 9
t0=$SECONDS
timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen|ScoreMods' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt
cd $ROOT
{ timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --ptx75 --sanitize 2>&1 | grep -E "ERROR SUMMARY|FAIL|Error" | tail -3; echo "rc=${PIPESTATUS[0]} memcheck ptx75"
  timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --ptx75 --sanitize 2>&1 | grep -E "RACECHECK SUMMARY|FAIL|Error" | tail -3; echo "rc=${PIPESTATUS[0]} racecheck ptx75"; } > $OUT/san.txt 2>&1
echo "tests+san $((SECONDS-t0))s"
{ for m in "--window 256,0" "--window 1024,-1 --softcap 30"; do echo "== varlen $m"; timeout 60 $B/goflash bench --varlen 512,8192,1000,3000,77,4096 --headdims 64,128 --causal both --reps 10 --warmup 3 $m 2>&1 | grep -vi warn; done; } > $OUT/varlen.txt 2>&1
PYTHONUNBUFFERED=1 timeout 220 python3 kernels/dev/decode_sidebyside.py --sweep > $OUT/sweep.txt 2>&1; echo "rc=$?" >> $OUT/sweep.txt
echo "all $((SECONDS-t0))s"
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -30
cat $OUT/san.txt
grep -vE "^$|^wrote" $OUT/varlen.txt | head -40
grep -vE "Warning|warn\(|scaled_dot" $OUT/sweep.txt
