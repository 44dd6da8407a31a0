#!/usr/bin/env bash
# bwd4 (issue 15): the large D128 single pass on the H200, one device call (~60 s).
set -uo pipefail
B=$PWD/.build/bwd4; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=/tmp/bwd4root
date -u +"run %Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $R/internal/kernels $R/kernels/dev
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" $B/fa2.fatbin.xz $R/internal/kernels/fa2.fatbin
cp $B/resources.md $R/internal/kernels/; cp $B/sidebyside.py $R/kernels/dev/
t=$SECONDS; BWD_ONLY=kvqsm80_d128 timeout 10 $B/bwd_check $R/internal/kernels >$OUT/bwd_check.log 2>&1; echo "bwd_check rc=$? $((SECONDS-t))s"
grep -v "^ok " $OUT/bwd_check.log | head; grep -c "^ok " $OUT/bwd_check.log
for s in "memcheck 1,3 8" "racecheck 1 7"; do set -- $s; t=$SECONDS
  BWD_ONLY=kvqsm80_d128_large BWD_SHAPES=$2 timeout $3 compute-sanitizer --tool $1 --error-exitcode 9 $B/bwd_check $R/internal/kernels >$OUT/san_$1.log 2>&1
  echo "$1 rc=$? $((SECONDS-t))s"; tail -2 $OUT/san_$1.log; done
t=$SECONDS; BWD_BENCH=1 BWD_ONLY=sm80_d128 timeout 12 $B/bwd_check $R/internal/kernels >$OUT/bench.log 2>&1; echo "bench rc=$? $((SECONDS-t))s"; grep bench $OUT/bench.log
t=$SECONDS; (cd $R && PYTHONUNBUFFERED=1 timeout 20 python3 kernels/dev/sidebyside.py --bwd d128) >$OUT/sidebyside.log 2>&1; echo "side rc=$? $((SECONDS-t))s"; cat $OUT/sidebyside.log
