#!/usr/bin/env bash
# Session 16, call 3: branch s16 (as call 2): the varlen Go tests and memcheck of the D64 Hopper
# modified kernels (call 2 timed out before them), then goflash: packed sequences with modifiers
# beside the padded batch (sm_80 path and default, D 64-256), the dense modified forward's
# cost at N 8192 on the sm_80 path and on Hopper. Carry .build/s16/p.tar.xz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/p; mkdir -p "$OUT" $B
[ -x $B/goflash ] || xz -dc .build/s16/p.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS; G=$B/goflash; ROOT=$PWD
cd flashattn || exit 9
timeout 170 $B/flashattn.test -test.run 'TestGPUVarlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt &
{ timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUHopperForward/(mods|alibi)-d64' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|^(ok|FAIL|PASS)|--- FAIL"; echo "rc=${PIPESTATUS[0]} memcheck $((SECONDS-t0))s"; } > $OUT/san.txt 2>&1
wait
cd $ROOT
echo "tests $((SECONDS-t0))s"
{ for m in "--softcap 30" "--alibi"; do for a in 80 0; do echo "== varlen force-arch $a $m"
  # shellcheck disable=SC2086
  timeout 60 $G bench --varlen 512,8192,1000,3000,77,4096 --headdims 64,96,128,256 --causal both --reps 10 --warmup 3 --force-arch $a $m 2>&1 | grep -vi warn; done; done; } > $OUT/varlen.txt 2>&1
echo "varlen $((SECONDS-t0))s"
{ for m in "--softcap 30" "--alibi" "--softcap 30 --alibi"; do for a in 80 0; do echo "== dense force-arch $a $m"
  # shellcheck disable=SC2086
  timeout 40 $G bench --seqlens 8192 --headdims 64,128 --reps 20 --warmup 5 --force-arch $a $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"; done; done; } > $OUT/mods.txt 2>&1
echo "all $((SECONDS-t0))s"
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL|^--- (PASS|FAIL)" $OUT/tests.txt | head -20
cat $OUT/san.txt
grep -vE "^$|^wrote" $OUT/varlen.txt
cat $OUT/mods.txt
