#!/usr/bin/env bash
# det session on the H200: run from the lead's checkout root with .build/det carried.
# .build/det: bwd_check.xz, flashattn.test.xz (CGO_ENABLED=0 go test -c of branch det), root/ (the
# branch's built internal/kernels/fa2.fatbin.xz, resources.md, kernels/dev/sidebyside.py).
set -uo pipefail
B=$PWD/.build/det; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
unxz() { python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$1" "$2"; }
unxz $B/bwd_check.xz /tmp/bwd_check; unxz $B/flashattn.test.xz /tmp/flashattn.test; chmod +x /tmp/bwd_check /tmp/flashattn.test
unxz $B/root/internal/kernels/fa2.fatbin.xz $B/root/internal/kernels/fa2.fatbin
date -u +"run %Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
K=$B/root/internal/kernels
BWD_ONLY="kvqsm80_d128" timeout 20 /tmp/bwd_check $K >"$OUT/bwd_check.log" 2>&1; echo "bwd_check rc=$?"
grep -v "^ok " "$OUT/bwd_check.log" | head -12
(cd $B/root && PYTHONUNBUFFERED=1 timeout 50 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d128) >"$OUT/bwd_sidebyside.log" 2>&1
echo "sidebyside rc=$?"; cat "$OUT/bwd_sidebyside.log"
BWD_BENCH=1 BWD_ONLY="sm80_d128" timeout 15 /tmp/bwd_check $K >"$OUT/bench.log" 2>&1; echo "bench rc=$?"; grep bench "$OUT/bench.log"
(cd flashattn && timeout 25 /tmp/flashattn.test -test.run 'TestGPUBackward|TestGPUConformanceBackward|TestGPUConformanceBF16Backward' -test.v -test.count=1) >"$OUT/gotest.log" 2>&1; echo "go test rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|_test.go:[0-9]+:" "$OUT/gotest.log" | head -20; grep -E "^--- (PASS|SKIP|FAIL)" "$OUT/gotest.log"
for tool in memcheck racecheck synccheck; do
  BWD_ONLY="_det2" BWD_SHAPES=3,7 timeout 12 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bwd_check $K >"$OUT/sanitizer_$tool.log" 2>&1
  echo "sanitizer $tool rc=$?"; tail -2 "$OUT/sanitizer_$tool.log"
done
