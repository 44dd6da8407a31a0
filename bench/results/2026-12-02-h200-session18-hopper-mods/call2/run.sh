#!/usr/bin/env bash
# Session 18, call 2: the modified Hopper forward's tile order and D64 tile. goflash_NAME: the
# same Go tree (fa2.fatbin reduced to its sm_90 image), the cubin and, for tiles, table_gen.go of:
#   base  the committed cubin
#   o1    TileOrder's grouped order only under a window (softcap / ALiBi alone: the plain order)
#   o2    o1 + the D64 modified tile Br 128 / Bc 128 / 2 stages (two consumers of 240 registers)
#   o3    o1 + the D64 modified tile Br 192 / Bc 96 / 4 stages (spills 4-12 B: measured only)
# goflash bench interleaved at N 2048 and 8192; the Go Hopper and conformance tests on o1 and o2.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/s18; mkdir -p "$OUT" $B
xz -dc .build/s18.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--window 8192,-1" "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1"; do
    for g in base o1 o2 o3; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 60 $B/goflash_$g bench --seqlens 2048,8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
for g in o1 o2; do
  (cd flashattn && timeout 140 $B/flashattn_$g.test -test.run 'TestGPUHopperForward|TestGPUHopperKernelTable|TestGPUConformance$' -test.v -test.count=1 >"$OUT/test_$g.txt" 2>&1; echo "test $g rc=$?")
  grep -cE "^\s*--- PASS" "$OUT/test_$g.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_$g.txt" | head -20
done
echo "all done $((SECONDS-t0))s"
# one line per modifier, kernel, D, causal, N: the modified line's TFLOP/s
awk '/^== round/{r=$3; g=$4; m=$5" "$6" "$7; next} /^ +fwd/{print m, "D"$2, $3, "N"$4, g, $8, "(plain "$7")"}' "$OUT/mods_ab.txt" | sort -s -k1,4 | tee "$OUT/summary.txt"
