#!/usr/bin/env bash
# Session 10, call 12: the Turing PTX shipped as a compressed PTX-only fatbin (fa2_sm75.fatbin):
# the forced sm_75 path's Go tests, the ladder, and the dev harness loading it. From the repo root, carry .build/c12.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c12; B=/tmp/c12
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
( cd flashattn; timeout 300 $B/flashattn.test -test.run 'SM75|Ladder|KernelTable|TestGPUConformance$' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt )
grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL" $OUT/tests.txt | head; grep -E "^--- (PASS|SKIP)" $OUT/tests.txt
PYTHONUNBUFFERED=1 timeout 120 python3 kernels/dev/decode_sidebyside.py --ptx75 --sanitize > $OUT/ptx75_decode.txt 2>&1; echo "rc=$?" >> $OUT/ptx75_decode.txt; tail -2 $OUT/ptx75_decode.txt
echo "all $((SECONDS-t0))s"
