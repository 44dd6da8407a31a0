#!/usr/bin/env bash
# Session 6 device run: branch decode5 (the one-launch decode). From the repo root, carry .build/s6d
# (bins.tar.xz: flashattn.test, goflash, bwd_check built from main after merging decode5).
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/s6d; B=/tmp/s6d
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/bins.tar.xz -C $B
R=$PWD
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
t0=$SECONDS
( cd flashattn; timeout 400 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt ) &
( cd $R; san $OUT/san.txt 200 memcheck python3 kernels/dev/decode_sidebyside.py --sanitize
  san $OUT/san.txt 200 memcheck python3 kernels/dev/decode_sidebyside.py --sanitize --ptx75
  san $OUT/san.txt 200 racecheck python3 kernels/dev/decode_sidebyside.py --sanitize
  san $OUT/san.txt 200 racecheck python3 kernels/dev/decode_sidebyside.py --sanitize --ptx75 ) &
( cd flashattn; san $OUT/san_go.txt 200 memcheck $B/flashattn.test -test.run 'TestGPUKVCacheConformance|TestGPUKVCacheBF16' -test.count=1 ) &
( for tool in memcheck racecheck; do BWD_ONLY='kvqsm80_d256|_det2' BWD_SHAPES=1,3 san $OUT/san_bwd.txt 300 $tool $B/bwd_check $R/internal/kernels; done
  grep -c "^ok" $OUT/san_bwd.txt >> $OUT/san_bwd.txt ) &
wait
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head -20
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|sanitize calls done|Error|error" $OUT/san.txt $OUT/san_go.txt $OUT/san_bwd.txt | head -24; tail -1 $OUT/san_bwd.txt
echo "check $((SECONDS-t0))s"
if [ "${BENCH:-1}" = 1 ]; then t0=$SECONDS
 ( cd $R; PYTHONUNBUFFERED=1 timeout 200 python3 kernels/dev/decode_sidebyside.py > $OUT/side.txt 2>&1; echo "rc=$?" >> $OUT/side.txt ); grep -vE "Warning|warn" $OUT/side.txt | tail -30; echo "side $((SECONDS-t0))s"
 ( cd $R; timeout 120 $B/goflash bench --decode --compare-torch --peak-tbps 4.8 --out /tmp/decbench > $OUT/bench_decode.txt 2>&1; echo "rc=$?" >> $OUT/bench_decode.txt; cp -r /tmp/decbench $OUT/ ); tail -30 $OUT/bench_decode.txt; echo "bench $((SECONDS-t0))s"
fi
if [ "${FWDBWD:-1}" = 1 ]; then t0=$SECONDS
 ( cd $R; timeout 300 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --deterministic --compare-torch --out /tmp/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "rc=$?" >> $OUT/bench_fwdbwd.txt; cp -r /tmp/fb $OUT/ ); tail -45 $OUT/bench_fwdbwd.txt; echo "fwdbwd $((SECONDS-t0))s"
fi
(cd "$OUT" && tar -czf /tmp/s6d-out.tgz . && find . -mindepth 1 -delete && mv /tmp/s6d-out.tgz ./out.tgz)
