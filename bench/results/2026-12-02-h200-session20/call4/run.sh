#!/usr/bin/env bash
# Session 20, call 4 (carry .build/c4/b.tar.xz): part of the softmax's exp2 on the FMA pipe in the
# softcap kernels, again, now that the D64 modified tile runs without the overlap (dev/e.diff:
# ex2_fma, 2^j 2^f with a degree-3 Remez polynomial on [-0.5, 0.5], relative error 7.5e-5; of every
# 8 column groups of a row, k take it). eK: k of 8 in the D64 softcap kernels (built with
# -DFA2_FMA_EXP2=K; e0 = the committed cubin, byte-identical); e2x: 2 of 8 at D64 and D128 too.
# goflash bench interleaved, two rounds, N 8192; the Go Hopper tests on e2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c4
mkdir -p "$OUT" $B; xz -dc .build/c4/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--softcap 30 --alibi"; do
    for g in e0 e1 e2 e3 e4 e2x; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
cd flashattn || exit 1
timeout 200 $B/flashattn_e2.test -test.run 'TestGPUHopperForward|TestGPUConformance$' -test.v -test.count=1 >"$OUT/test_e2.txt" 2>&1; echo "test e2 rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_e2.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_e2.txt" | head -10
