#!/usr/bin/env bash
# Session 10, call 8: goflash bench, the modified forward beside the plain one (gpu-mod vs ours), fatbin of this commit.
# From the repo root, carry .build/c8.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=$PWD/.build/c8; B=/tmp/c8
mkdir -p "$OUT" $B; [ -x $B/goflash ] || tar -xJf $S/p.tar.xz -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$SECONDS; mkdir -p $OUT/bench
for m in "softcap 30" "alibi" "softcap 30 --alibi" "window 2048,-1"; do
  name=$(echo "$m" | tr -cd 'a-z0-9'); read -ra flags <<<"--$m"
  { echo "== --$m"; timeout 90 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction fwd --no-report --reps 10 --warmup 3 "${flags[@]}" --out "$OUT/bench/$name" 2>&1; echo "rc=$?"; } >> $OUT/bench.txt
done
echo "bench $((SECONDS-t0))s"; grep -vE "^\s*$" $OUT/bench.txt | grep -E "^==|fwd|rc=|mod|ours" | head -80
