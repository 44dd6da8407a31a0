#!/usr/bin/env bash
# Session 26, call 1 (carry .build/c1/b.tar.xz): FA3's ping-pong (the consumers take turns to
# issue a step's two GEMMs, named barriers) in the Hopper D128 modified kernels, which keep the
# intra-warpgroup overlap. goflash_X embeds fa2_sm90a.cubin X:
#   base    main's cubin
#   pp      ping-pong in the D128 modified kernels: rescale, then the waits, then the turn (S_n, P V)
#   pp2     the same with the rescale inside the turn, between S_n and P V (main's order)
#   ppall2  pp2 in every non-causal Hopper kernel with the overlap (plain D64 and D128 too)
# goflash bench interleaved, two rounds, N 8192; then the Go Hopper tests and synccheck/racecheck on pp.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1" ""; do
    for g in base pp pp2 ppall2; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
for g in base ppall2 base ppall2; do echo "== D64 plain $g"; timeout 40 $B/goflash_$g bench --seqlens 4096,8192,16384 --headdims 64,128 --causal false --reps 20 --warmup 5 --out /tmp/b 2>&1 | grep -E "^ +fwd"; done > "$OUT/plain_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"; cat "$OUT/plain_ab.txt"
cd flashattn || exit 1
timeout 150 $B/flashattn_pp.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test_pp.txt" 2>&1; echo "test pp rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_pp.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_pp.txt" | head -10
# (pp2 has no test binary in this call: the carry limit)
for tool in synccheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_pp.test -test.run 'TestGPUHopperForward/(mods|alibi)-d128' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/$tool.txt"; echo "$tool rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
echo "all done $((SECONDS-t0))s"
