#!/usr/bin/env bash
# Session 28, call 2 (carry .build/s28/b2.tar.xz): goflash_X embeds fa2_sm90a.cubin X. base = main's;
# ship = the warp-uniform warpgroup index where call 1 measured it faster (causal plain, modified
# kernels but the softcap-only ones), each kernel's SASS either base's or call 1's uni's; ppcap =
# uni everywhere in the modified kernels plus FA3's ping-pong in the D128 softcap kernels.
# goflash bench interleaved, two rounds; goflash check; the Hopper tests and sanitizers on ship.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c2
mkdir -p "$OUT" $B; xz -dc .build/s28/b2.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for g in base ship; do
    echo "== round $r $g plain"
    timeout 60 $B/goflash_$g bench --seqlens 2048,4096,8192,16384 --headdims 64,128 --causal both --reps 20 --warmup 5 --out /tmp/b 2>&1 | grep -E "^ +fwd"
  done
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 32768,-1" "--window 2048,-1"; do
    gs="base ship"; [[ $m == --softcap* ]] && gs="base ship ppcap"
    for g in $gs; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 4096,8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/bench_ab.txt" 2>&1
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/bench_ab.txt" | sort -s -k1,8 > "$OUT/summary.txt"
echo "bench done $((SECONDS-t0))s"
timeout 60 $B/goflash_ship check > "$OUT/check.txt" 2>&1; echo "check rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/check.txt"
cd flashattn || exit 1
timeout 170 $B/flashattn_ship.test -test.run 'TestGPUHopperForward|TestHopperKernelTable' -test.v -test.count=1 >"$OUT/test.txt" 2>&1; echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test.txt" | head -10
for tool in memcheck synccheck racecheck; do
  timeout 75 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_ship.test -test.run 'TestGPUHopperForward/(mods|tiles-d64-causaltrue)' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/$tool.txt"; echo "$tool rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
echo "all done $((SECONDS-t0))s"
