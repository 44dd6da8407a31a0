#!/usr/bin/env bash
# mask4 device run (dev cubins, sm_90 only): the D64 softcap kernel with kPoly = 0,2,3,4,5,8 beside
# the plain D64 kernel (same cubin, interleaved), ALiBi and the window-only kernel too; correctness
# vs float32 torch; memcheck and racecheck of the kPoly=3 fp16/bf16 softcap kernels at N 1024.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/mask4; B=/tmp/mask4
mkdir -p "$OUT" $B; tar -xf $S/dev.tar -C $B; cd $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch;print(torch.__version__)"; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS
timeout 45 python3 poly_sweep.py 0 2 4 5 8 3 > $OUT/poly_sweep.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/poly_sweep.txt; cat $OUT/poly_sweep.txt
for tool in memcheck racecheck; do
  ( timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 --kernel-name regex:'^cap' python3 poly_sweep.py san 3 > $OUT/san_$tool.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/san_$tool.txt ) &
done; wait
grep -E "check|ERROR SUMMARY|RACECHECK SUMMARY|rc=" $OUT/san_*.txt
(cd "$OUT" && tar -czf /tmp/mask4-out.tgz . && find . -mindepth 1 -delete && mv /tmp/mask4-out.tgz ./out.tgz)
