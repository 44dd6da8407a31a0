#!/usr/bin/env bash
# Session 16, call 4: the sm_80 modified forward, dense calls, before (goflash_mn: main's fatbin, its sm_90 image alone) and
# after (goflash_br: K, V, O, L pointers and Nq, Nk in shared memory) the change, interleaved, N 8192.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/ab; mkdir -p "$OUT" $B
xz -dc .build/s16/ab.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30 --alibi" "--softcap 30" "--alibi" "--window 2048,-1"; do
    for g in mn br; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --reps 20 --warmup 5 --force-arch 80 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
    done
  done
done > "$OUT/sm80_mods_ab.txt" 2>&1
echo "done $((SECONDS-t0))s"
cat "$OUT/sm80_mods_ab.txt"
