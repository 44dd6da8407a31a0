#!/usr/bin/env bash
# Session 16, call 1: the D64 modified Hopper forward on a Br-192 / Bc-64 / 4-stage tile (goflash_m)
# against main's Br-128 / Bc-128 (goflash_main), goflash bench interleaved, N 8192 and 16384.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/m; mkdir -p "$OUT" $B
xz -dc .build/s16/m.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1"; do
    for g in main m; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 60 $B/goflash_$g bench --seqlens 8192,16384 --headdims 64 --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "done $((SECONDS-t0))s"
cat "$OUT/mods_ab.txt"
