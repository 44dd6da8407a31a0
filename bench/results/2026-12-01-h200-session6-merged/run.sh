#!/usr/bin/env bash
# Session 6 device run 1: main after merging bwd5 and mask3 (compressed fatbin). From the repo root, carry .build/s6.
# PHASE: check (correctness, in parallel) and/or bench (timings, one at a time).
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$PWD; S=$R/.build/s6; B=/tmp/s6
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/bins.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1 2>/dev/null; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
if [[ "${PHASE:-check bench}" == *check* ]]; then t0=$SECONDS
 ( cd flashattn; timeout 400 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt ) &
 ( timeout 200 $B/bwd_check $R/internal/kernels > $OUT/bwd_check.log 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/bwd_check.log
   BWD_ONLY=dkdvqdet BWD_SHAPES=1,3 san $OUT/san_bwd.txt 200 memcheck $B/bwd_check $R/internal/kernels
   BWD_ONLY=dkdvqdet BWD_SHAPES=1,3 san $OUT/san_bwd.txt 200 racecheck $B/bwd_check $R/internal/kernels ) &
 ( cd flashattn; c='alibi'
   san $OUT/san_alibi.txt 120 memcheck $B/flashattn.test -test.run "TestGPUConformance\$/$c" -test.count=1
   san $OUT/san_alibi.txt 120 memcheck $B/flashattn.test -test.run "TestGPUConformanceSM75/$c" -test.count=1
   san $OUT/san_alibi.txt 120 memcheck $B/flashattn.test -test.run "TestGPUConformanceBF16\$/$c" -test.count=1
   san $OUT/san_alibi.txt 120 racecheck $B/flashattn.test -test.run "TestGPUConformance\$/$c" -test.count=1 ) &
 wait
 grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -20
 grep -vE "^ok " $OUT/bwd_check.log | tail -8; grep -cE "^ok " $OUT/bwd_check.log
 grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" $OUT/san_bwd.txt $OUT/san_alibi.txt
 echo "check $((SECONDS-t0))s"
fi
if [[ "${PHASE:-check bench}" == *bench* ]]; then t0=$SECONDS; mkdir -p /tmp/bench
 for m in alibi "softcap 30"; do
   name=$(echo "$m" | tr -cd 'a-z0-9'); read -ra flags <<<"--$m"
   { echo "== --$m"; timeout 70 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction fwd --no-report --reps 10 --warmup 3 "${flags[@]}" --out "/tmp/bench/$name" 2>&1; echo "rc=$?"; } >> $OUT/bench-mods.txt
 done; (cd /tmp && tar -czf $OUT/bench-mods.tar.gz bench); grep -E "^==|^ +fwd|^rc" $OUT/bench-mods.txt; echo "mods $((SECONDS-t0))s"
 PYTHONUNBUFFERED=1 timeout 240 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d64 d128 > $OUT/bwd_sidebyside.log 2>&1; echo "rc=$?" >> $OUT/bwd_sidebyside.log; tail -40 $OUT/bwd_sidebyside.log; echo "side $((SECONDS-t0))s"
 k='regex:^fa2_fwd_sm80_d64(_mod_cap)?$'
 m=sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
 timeout 90 ncu --kernel-name "$k" --launch-count 2 --metrics "$m" --section WarpStateStats --section SourceCounters \
   $B/goflash bench --seqlens 8192 --headdims 64 --direction fwd --no-report --reps 1 --warmup 0 --softcap 30 --out /tmp/ncub > "$OUT/ncu_softcap.txt" 2>&1
 echo "ncu rc=$? $((SECONDS-t0))s"; grep -vE "^==PROF==|^\s*$" "$OUT/ncu_softcap.txt" | grep -E "fa2_|pct|inst_executed.sum|duration|Stall|stall|registers" | head -50
fi
(cd "$OUT" && tar -czf /tmp/s6-out.tgz . && find . -mindepth 1 -delete && mv /tmp/s6-out.tgz ./out.tgz)
