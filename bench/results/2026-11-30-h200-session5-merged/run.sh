#!/usr/bin/env bash
# Session 5 run M1: the merged build (varlen, mask2b, d256, lead4's decode) on the H200.
# From the repo root, carry .build/m1 (bins.tar.xz: flashattn.test, goflash, bwd_check).
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$PWD; B=/tmp/m1; mkdir -p $B "$OUT/r"; O=$OUT/r
tar -xJf .build/m1/bins.tar.xz -C $B
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; cat .build/m1/COMMIT; } > $O/gpu.txt
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
if [[ "${PHASE:-check bench}" == *check* ]]; then
( cd flashattn; t=$SECONDS; timeout 330 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 -test.timeout 320s > $O/tests.txt 2>&1; echo "rc=$? $((SECONDS-t))s" >> $O/tests.txt ) &
( timeout 200 $B/bwd_check internal/kernels > $O/bwd_check.log 2>&1; echo "rc=$?" >> $O/bwd_check.log ) &
( cd flashattn
  san $O/sanitizers.txt 150 memcheck $B/flashattn.test -test.run 'TestGPUKVCacheConformance/path75' -test.count=1
  san $O/sanitizers.txt 150 racecheck $B/flashattn.test -test.run 'TestGPUKVCacheConformance/path75' -test.count=1 ) &
wait
grep -E "^--- FAIL|^FAIL|^panic|^rc=|^    --- FAIL" $O/tests.txt | head -30; grep -c "^--- PASS" $O/tests.txt
grep -E "^check|^rc=|FAIL" $O/bwd_check.log | head; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc=" $O/sanitizers.txt
date -u
fi
if [[ "${PHASE:-check bench}" == *bench* ]]; then
t=$SECONDS; timeout 300 $B/goflash bench --compare-torch --direction both --seqlens 2048,4096,8192 --headdims 64,128 --reps 10 --warmup 3 --out $O/bench > $O/bench.txt 2>&1; echo "bench rc=$? $((SECONDS-t))s"
grep -E "^ +(fwd|bwd|both)|ratio|vs " $O/bench.txt | head -80
t=$SECONDS; PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d256 > $O/bwd_sidebyside_d256.txt 2>&1; echo "side rc=$? $((SECONDS-t))s"; cat $O/bwd_sidebyside_d256.txt
date -u
fi
(cd "$OUT" && tar -czf /tmp/m1-out.tgz r && rm -rf r && mv /tmp/m1-out.tgz out.tgz)
