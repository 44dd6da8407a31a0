#!/usr/bin/env bash
# modbwd device run: the modified backward (window, softcap, ALiBi) on the H200. From the repo root, carry .build/modbwd.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/modbwd; B=/tmp/modbwd
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/bins.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $S/commit.txt; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --kernel-name kns=_mod --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
t0=$SECONDS; mkdir -p $B/fa; cp -r $PWD/flashattn/testdata $B/fa/ 2>/dev/null
( cd flashattn; timeout 60 $B/flashattn.test -test.run 'TestGPUConformance|TestGPUBackend|TestKernelTable' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt ) &
( cd flashattn; c='(window|softcap|alibi|all)'
  san $OUT/san.txt 30 memcheck $B/flashattn.test -test.run "TestGPUConformanceBackward/deterministic/$c" -test.count=1
  san $OUT/san.txt 10 memcheck $B/flashattn.test -test.run "TestGPUConformanceSM75/$c" -test.count=1
  san $OUT/san.txt 10 memcheck $B/flashattn.test -test.run "TestGPUConformanceBF16Backward/deterministic/$c" -test.count=1
  san $OUT/san.txt 15 racecheck $B/flashattn.test -test.run "TestGPUConformanceBackward/deterministic/$c" -test.count=1
 ) &
wait
grep -cE "^\s*--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|--- FAIL" $OUT/tests.txt | head -30
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|No kernels" $OUT/san.txt
echo "check $((SECONDS-t0))s"
t0=$SECONDS; mkdir -p /tmp/bench
for m in "softcap 30" alibi "window 1024,0"; do
  name=$(echo "${m%% *}" | tr -cd 'a-z0-9'); read -ra flags <<<"--$m"
  { echo "== --$m"; timeout 13 $B/goflash bench --seqlens 8192 --headdims 64,128 --causal true --direction bwd --no-report --reps 5 --warmup 2 "${flags[@]}" --out "/tmp/bench/$name" 2>&1; echo "rc=$?"; } >> $OUT/bench-bwd-mods.txt
done; (cd /tmp && tar -czf $OUT/bench-bwd-mods.tar.gz bench); cat $OUT/bench-bwd-mods.txt | grep -vE "^\s*$" | head -60; echo "bench $((SECONDS-t0))s"
(cd "$OUT" && tar -czf /tmp/modbwd-out.tgz . && find . -mindepth 1 -delete && mv /tmp/modbwd-out.tgz ./out.tgz)
