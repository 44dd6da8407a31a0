#!/usr/bin/env bash
# Session 18, call 1: the Hopper softcap kernels with part of the softmax's exp2 on the FMA pipe
# (mma.cuh's exp2_fma), goflash bench interleaved across cubins, N 8192; the Go Hopper and
# conformance tests on two of them. goflash_NAME / flashattn_NAME.test: the same Go tree, the
# cubin of kernels/fa2_sm90a.cu built with -DFA2_FMA_EXP2_CAP=c -DFA2_FMA_EXP2_PLAIN=p (of every
# 8 scores, how many take exp2_fma): base 0/0 (= the committed cubin), c2 2/0, c3 3/1, c4 4/0,
# c6 6/2; fa2.fatbin reduced to its sm_90 image to fit the carry.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/s18; mkdir -p "$OUT" $B
xz -dc .build/s18.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--softcap 30 --alibi"; do
    for g in base c2 c3 c4 c6; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 60 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
for m in "--window 8192,-1" "--alibi"; do
  echo "== base $m"
  # shellcheck disable=SC2086
  timeout 60 $B/goflash_base bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
done > "$OUT/tile.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
cat "$OUT/mods_ab.txt" "$OUT/tile.txt"
for g in c4 c6; do
  (cd flashattn && timeout 200 $B/flashattn_$g.test -test.run 'Hopper|TestGPUConformance$' -test.v -test.count=1 >"$OUT/test_$g.txt" 2>&1; echo "test $g rc=$?")
  grep -cE "^\s*--- PASS" "$OUT/test_$g.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_$g.txt" | head -20
done
echo "all done $((SECONDS-t0))s"
