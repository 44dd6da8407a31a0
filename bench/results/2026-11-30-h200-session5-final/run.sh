#!/usr/bin/env bash
# Session 5 run M2: main after merging raw12, decode3, varlenbwd. Carry .build/m2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/m2; O=$OUT/r; mkdir -p $B $O
tar -xJf .build/m2/bins.tar.xz -C $B
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; cat .build/m2/COMMIT; } > $O/gpu.txt
( cd flashattn; t=$SECONDS; timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 -test.timeout 320s > $O/tests.txt 2>&1; echo "rc=$? $((SECONDS-t))s" >> $O/tests.txt ) &
( cd flashattn; timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUVarlenConformance/path75' -test.count=1 > $O/racecheck-varlen75.txt 2>&1; echo "rc=$?" >> $O/racecheck-varlen75.txt
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUVarlenConformance/path75' -test.count=1 > $O/memcheck-varlen75.txt 2>&1; echo "rc=$?" >> $O/memcheck-varlen75.txt ) &
wait
grep -E "^--- FAIL|^FAIL|^panic|^rc=|^    --- FAIL" $O/tests.txt | head -30; grep -c "^--- PASS" $O/tests.txt; grep -E "^--- SKIP" $O/tests.txt
tail -3 $O/racecheck-varlen75.txt $O/memcheck-varlen75.txt
A=1387,5557,6267,6698,5853,4830,2534,2732,6534,2607,2896,6525,1106,5906,4196,2994
timeout 150 $B/goflash bench --varlen "$A" --headdims 64,128 --direction bwd --reps 10 > $O/bench-varlen-bwd.txt 2>&1; echo "bench rc=$?"; cat $O/bench-varlen-bwd.txt | tail -20
(cd "$OUT" && tar -czf /tmp/m2-out.tgz r && rm -rf r && mv /tmp/m2-out.tgz out.tgz)
