#!/usr/bin/env bash
# Session 11, call 1: packed sequences through the modified kernels (fatbin of this commit):
# Go GPU tests, compute-sanitizer on the varlen modifier cases, modifier and varlen benches. Carry .build/c1.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c1; B=/tmp/c1
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
ROOT=$PWD; cd flashattn || exit 9
t0=$SECONDS
timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen|ScoreMods' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt &
c='(varlen-window|varlen-all|varlen-d64-window|varlen-d128-alibi|varlen-d128-window)'
san() { timeout 150 compute-sanitizer --tool "$1" --error-exitcode 9 $B/flashattn.test -test.run "$2" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" ; echo "rc=${PIPESTATUS[0]} ($1 $2)"; }
{ san memcheck "TestGPUVarlenConformance/path0/$c"; san memcheck "TestGPUVarlenConformance/path75/$c"; san memcheck "TestGPUVarlenBF16/$c"
  san racecheck "TestGPUVarlenConformance/path0/$c"; san racecheck "TestGPUVarlenConformance/path75/$c"; } > $OUT/san.txt 2>&1
wait
cd $ROOT
# decode dev A/B: A = the prologue reordered + contiguous copy fast path (.build/s11/dec/var), B = shipped code (orig)
DV=.build/s11/dec
{ PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/decode_sidebyside.py --module $DV/var/dec.cubin --ab $DV/orig/dec.cubin 2>&1 | grep -v -i warn; echo "rc=$?"; } > $OUT/dec_ab.txt
{ timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --module $DV/var/dec.cubin --sanitize 2>&1 | grep -E "ERROR SUMMARY|FAIL|rc=|Error" | tail -3; echo "rc=${PIPESTATUS[0]} memcheck"
  timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 kernels/dev/decode_sidebyside.py --module $DV/var/dec.cubin --sanitize 2>&1 | grep -E "RACECHECK SUMMARY|FAIL|Error" | tail -3; echo "rc=${PIPESTATUS[0]} racecheck"; } > $OUT/dec_san.txt
G=$B/goflash; bb="$G bench --direction fwd --reps 10 --warmup 3"
{ for m in "" "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1"; do echo "== D64 $m"; timeout 60 $bb --seqlens 2048,4096,8192 --headdims 64 $m 2>&1 | grep -vi warn; done; } > $OUT/mods.txt 2>&1
{ for m in "" "--softcap 30" "--window 256,0" "--alibi"; do echo "== varlen $m"; timeout 60 $G bench --varlen 512,8192,1000,3000,77,4096 --headdims 64,128 --causal false,true --reps 10 --warmup 3 $m 2>&1 | grep -vi warn; done; } > $OUT/varlen.txt 2>&1
{ for m in "--softcap 30" "--alibi"; do echo "== bwd $m"; timeout 60 $G bench --direction bwd --reps 10 --warmup 3 --seqlens 4096,8192 --headdims 64,128 --causal true $m 2>&1 | grep -vi warn; done; } > $OUT/modbwd.txt 2>&1
echo "all $((SECONDS-t0))s"
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL" $OUT/tests.txt | head -30
grep -E "varlen-(d64|d128-alibi|d128-window|all|window)" $OUT/tests.txt | grep -E -- "--- (PASS|FAIL|SKIP)" | head -24
cat $OUT/san.txt
cat $OUT/dec_ab.txt $OUT/dec_san.txt
