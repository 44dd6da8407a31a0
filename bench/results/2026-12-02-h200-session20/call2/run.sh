#!/usr/bin/env bash
# Session 20, call 2 (carry .build/c2/b.tar.xz): the Hopper D64 modified forward at Bc 128 / 4 stages,
# P V waited for before S_n is issued (step_seq), S's first k16 wgmma with S write-only (wgmma_ss_init:
# S's old values are not inputs, so S's registers are free under P V; 0 spills):
#   c3  step_seq + ss_init in the D64 modified kernels only
#   c4  c3 + ss_init in every Hopper kernel (plain and D128 too)
# against the committed cubin (base), goflash bench interleaved, two rounds, D64 and D128, N 8192;
# the Go Hopper tests on c3 and c4, memcheck of the D64 modified cases on c3; the bare-read floor
# again with 1-8 CTAs per SM of 128-1024 threads.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c2; R=bench/results/2026-12-02-h200-session20
mkdir -p "$OUT" $B; xz -dc .build/c2/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 8192,-1" "--window 2048,-1" ""; do
    for g in base c3 c4; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
cd flashattn || exit 1
for v in c3 c4; do
  timeout 110 $B/flashattn_$v.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test_$v.txt" 2>&1; echo "test $v rc=$? $((SECONDS-t0))s"
  grep -cE "^\s*--- PASS" "$OUT/test_$v.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_$v.txt" | head -10
done
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn_c3.test -test.run 'TestGPUHopperForward/(mods|alibi)-d64' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/memcheck.txt"; echo "memcheck rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
cd .. && PYTHONUNBUFFERED=1 timeout 100 python3 $R/dev/readfloor.py $B/readfloor.cubin 2>&1 | grep -v -i "warn\|return F" | tee "$OUT/readfloor.txt"
echo "all done $((SECONDS-t0))s"
