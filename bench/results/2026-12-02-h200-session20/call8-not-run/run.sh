#!/usr/bin/env bash
# Session 20, call 8, NOT RUN (no device time left; carry .build/c8/b.tar.xz): ALiBi's column-bias form (kSide) off in the kernels
# without the overlap (dev/g1.diff: D64's modified ALiBi kernel takes the |distance| form of
# ScoreMods::apply); goflash bench against main's cubin (base), two rounds; its ALiBi tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c8
mkdir -p "$OUT" $B; xz -dc .build/c8/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do for g in base g1; do
  echo "== round $r $g --alibi"
  timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64 --causal both --reps 20 --warmup 5 --alibi --out /tmp/b 2>&1 | grep -E "^ +fwd"
done; done | tee "$OUT/mods_ab.txt"
cd flashattn || exit 1
timeout 100 $B/flashattn_g1.test -test.run 'TestGPUHopperForward/alibi-d64|TestGPUConformance/alibi' -test.v -test.count=1 >"$OUT/test_g1.txt" 2>&1; echo "test g1 rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_g1.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_g1.txt" | head -10
