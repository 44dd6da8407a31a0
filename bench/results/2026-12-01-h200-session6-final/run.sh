#!/usr/bin/env bash
# Session 6 final device run: main after merging bwd6-row, modbwd, decode4 (the merge's weights once per row).
# From the repo root, carry .build/final (bins.tar.xz: flashattn.test, goflash, bwd_check built from main).
# PHASE: check and/or bench.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/final; B=/tmp/final; R=$PWD
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/bins.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
if [[ "${PHASE:-check bench}" == *check* ]]; then t0=$SECONDS
 ( cd flashattn; timeout 450 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt ) &
 ( timeout 250 $B/bwd_check $R/internal/kernels > $OUT/bwd_check.log 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/bwd_check.log
   for tool in memcheck racecheck; do BWD_ONLY='sm80_d64' BWD_SHAPES=1,3 san $OUT/san_bwd.txt 200 $tool $B/bwd_check $R/internal/kernels; done ) &
 ( cd flashattn; c='(window|softcap|alibi|all)'
   san $OUT/san_mod.txt 240 memcheck --kernel-name kns=_mod $B/flashattn.test -test.run "TestGPUConformanceSM75/$c" -test.count=1
   san $OUT/san_mod.txt 240 racecheck --kernel-name kns=_mod $B/flashattn.test -test.run "TestGPUConformanceSM75/$c" -test.count=1
   san $OUT/san_mod.txt 120 racecheck --kernel-name kns=_mod $B/flashattn.test -test.run "TestGPUConformanceBF16Backward/default/$c" -test.count=1 ) &
 ( san $OUT/san_dec.txt 200 memcheck python3 kernels/dev/decode_sidebyside.py --sanitize
   san $OUT/san_dec.txt 200 memcheck python3 kernels/dev/decode_sidebyside.py --sanitize --ptx75
   san $OUT/san_dec.txt 200 racecheck python3 kernels/dev/decode_sidebyside.py --sanitize ) &
 wait
 grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -20
 grep -vE "^ok " $OUT/bwd_check.log | tail -8; grep -cE "^ok " $OUT/bwd_check.log $OUT/san_bwd.txt
 grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" $OUT/san_*.txt
 echo "check $((SECONDS-t0))s"
fi
if [[ "${PHASE:-check bench}" == *bench* ]]; then t0=$SECONDS
 PYTHONUNBUFFERED=1 timeout 240 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d64 d128 > $OUT/bwd_sidebyside.log 2>&1; echo "rc=$?" >> $OUT/bwd_sidebyside.log; grep -vE "Warning|warn|return Variable" $OUT/bwd_sidebyside.log | tail -16; echo "side $((SECONDS-t0))s"
 timeout 240 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out /tmp/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "rc=$?" >> $OUT/bench_fwdbwd.txt; cp -r /tmp/fb $OUT/; grep -E "^ +(fwd|bwd|fwdbwd) " $OUT/bench_fwdbwd.txt; echo "fwdbwd $((SECONDS-t0))s"
 PYTHONUNBUFFERED=1 timeout 120 python3 kernels/dev/decode_sidebyside.py > $OUT/decode_side.txt 2>&1; echo "rc=$?" >> $OUT/decode_side.txt; grep -vE "Warning|warn|return F" $OUT/decode_side.txt | tail -22; echo "decode $((SECONDS-t0))s"
fi
(cd "$OUT" && tar -czf /tmp/final-out.tgz . && find . -mindepth 1 -delete && mv /tmp/final-out.tgz ./out.tgz)
