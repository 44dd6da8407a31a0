#!/usr/bin/env bash
# Session 9, call 7: the final build (tree merge with 8 splits loaded at once, uniform_len, paged rule):
# Go GPU tests, sanitizers, decode beside SDPA in one process. From the repo root, carry .build/c7.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c7; B=/tmp/c7
mkdir -p "$OUT" $B; [ -x $B/flashattn.test ] || tar -xJf $S/p.tar.xz -C $B
R=$PWD
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
san() { local o=$1 to=$2 tool=$3; shift 3; timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >> "$o" 2>&1; echo "rc=$? ($tool $*)" >> "$o"; }
t0=$SECONDS
( cd flashattn; timeout 300 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt ) &
( cd $R; for tool in memcheck racecheck; do for x in "" --ptx75; do san $OUT/san.txt 200 $tool python3 kernels/dev/decode_sidebyside.py --sanitize $x; done; done ) &
( cd flashattn; san $OUT/san_go.txt 250 memcheck $B/flashattn.test -test.run 'TestGPUKVCacheConformance/path0-splits[37]|TestGPUKVCacheDevice|TestGPUKVCacheBF16' -test.count=1 ) &
wait
grep -cE "^--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL" $OUT/tests.txt | head -30
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|sanitize calls done|Error|error" $OUT/san.txt $OUT/san_go.txt | head -24
echo "check $((SECONDS-t0))s"
t0=$SECONDS
PY="python3 kernels/dev/decode_sidebyside.py"
PYTHONUNBUFFERED=1 timeout 200 $PY > $OUT/side.txt 2>&1; echo "rc=$?" >> $OUT/side.txt; grep -vE "Warning|warn|scaled_dot" $OUT/side.txt; echo "side $((SECONDS-t0))s"
PYTHONUNBUFFERED=1 timeout 100 $PY --mods > $OUT/mods.txt 2>&1; echo "rc=$?" >> $OUT/mods.txt; grep -vE "Warning|warn|scaled_dot" $OUT/mods.txt; echo "mods $((SECONDS-t0))s"
PYTHONUNBUFFERED=1 timeout 150 $PY --sweep-paged > $OUT/sweep_paged.txt 2>&1; echo "rc=$?" >> $OUT/sweep_paged.txt; grep -vE "Warning|warn|scaled_dot" $OUT/sweep_paged.txt; echo "paged $((SECONDS-t0))s"
