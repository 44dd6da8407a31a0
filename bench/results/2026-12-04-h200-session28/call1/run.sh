#!/usr/bin/env bash
# Session 28, call 1 (carry .build/s28/b.tar.xz): goflash_X embeds fa2_sm90a.cubin X. base = main's;
# uni = session 27's prepared diff (the consumer warpgroup index broadcast from lane 0, so ptxas
# treats it as warp-uniform); capmax = uni + the softcap kernels' block max from the raw scores (tanh
# is monotone). fa2.fatbin reduced to its sm_90 image. goflash bench interleaved, two rounds: the
# plain/causal sweep N 2048-16384 and every modifier at N 8192; then the Hopper and conformance tests.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/s28/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for g in base uni capmax; do
    echo "== round $r $g plain"
    timeout 60 $B/goflash_$g bench --seqlens 2048,4096,8192,16384 --headdims 64,128 --causal both --reps 20 --warmup 5 --out /tmp/b 2>&1 | grep -E "^ +fwd"
  done
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 32768,-1" "--window 2048,-1"; do
    for g in base uni capmax; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
  echo "bench round $r done $((SECONDS-t0))s" >&2
done > "$OUT/bench_ab.txt" 2>&1
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/bench_ab.txt" | sort -s -k1,8 > "$OUT/summary.txt"
echo "bench done $((SECONDS-t0))s"
cd flashattn || exit 1
timeout 200 $B/flashattn_capmax.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test.txt" 2>&1; echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test.txt" | head -10
echo "all done $((SECONDS-t0))s"
