#!/usr/bin/env bash
# For the lead (bwd4, commit e2b8367 or its merge): what bwd4 could not run. From /work/main, carry .build/bwd4:
#   bash .build/bwd4/lead.sh      (~2-4 min: sidebyside --bwd D64+D128, then the Go GPU backward tests)
set -uo pipefail
B=$PWD/.build/bwd4; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=/tmp/bwd4root
unxz() { python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$1" "$2"; }
date -u +"run %Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $R/internal/kernels $R/kernels/dev
unxz $B/fa2.fatbin.xz $R/internal/kernels/fa2.fatbin; cp $B/resources.md $R/internal/kernels/; cp $B/sidebyside.py $R/kernels/dev/
unxz $B/flashattn.test.xz /tmp/bwd4.test; chmod +x /tmp/bwd4.test
t=$SECONDS; (cd $R && PYTHONUNBUFFERED=1 timeout 240 python3 kernels/dev/sidebyside.py --bwd) >$OUT/sidebyside.log 2>&1; echo "side rc=$? $((SECONDS-t))s"; cat $OUT/sidebyside.log
t=$SECONDS; (cd flashattn && timeout 240 /tmp/bwd4.test -test.run 'TestGPUConformanceBackward|TestGPUBackwardPaths|TestGPUBackwardDevice|TestGPUBackwardFreesMemory|KernelTable' -test.v -test.count=1) >$OUT/gotest.log 2>&1
echo "go rc=$? $((SECONDS-t))s"; grep -E "^(--- |FAIL|ok|PASS|panic)|_test.go:[0-9]+:" $OUT/gotest.log | head -40
t=$SECONDS; BWD_BENCH=1 BWD_ONLY=sm80_d128 timeout 90 $B/bwd_check $R/internal/kernels >$OUT/bench.log 2>&1; echo "bench rc=$? $((SECONDS-t))s"; grep bench $OUT/bench.log
