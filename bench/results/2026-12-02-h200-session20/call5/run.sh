#!/usr/bin/env bash
# Session 20, call 5 (carry .build/c5/b.tar.xz): the D128 modified Hopper tile without the overlap
# (dev/fN.diff; base = the committed cubin: Br 128 / Bc 128 / 2 stages, overlapped):
#   f3  Bc 192, no overlap, S write-only at its first wgmma in every D128 modified kernel (spills 4-16 B
#       in the ALiBi kernels: timed for the record only)
#   f4  Bc 128, no overlap, S write-only in every D128 modified kernel
#   f5  Bc 128, no overlap, S write-only with the softcap only (as D64 ships)
# goflash bench interleaved, two rounds, D128, N 8192.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c5
mkdir -p "$OUT" $B; xz -dc .build/c5/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 8192,-1" "--window 2048,-1"; do
    for g in base f3 f4 f5; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
