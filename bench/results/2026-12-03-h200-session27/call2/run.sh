#!/usr/bin/env bash
# Session 27, call 2 (carry .build/c2/b.tar.xz): call 1's ALiBi k16 step without spills (v5: the
# slope-fits bit in g, only the two ALiBi kernels' SASS differ from main), and v5 without the
# ping-pong in the D128 ALiBi kernel (nopp). goflash_X embeds fa2_sm90a.cubin X (base = main's).
# goflash bench interleaved, two rounds, N 4096-16384; the modified kernel with a window past every
# key (the mod kernels' own cost, same SASS in every build) once per round; then the Hopper and
# ALiBi conformance tests and the sanitizers on v5 and nopp.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c2
mkdir -p "$OUT" $B; xz -dc .build/c2/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for g in base v5 nopp; do
    echo "== round $r $g --alibi"
    timeout 60 $B/goflash_$g bench --seqlens 4096,8192,16384 --headdims 64,128 --causal both --reps 20 --warmup 5 --alibi --out /tmp/b 2>&1 | grep -E "^ +fwd"
  done
  echo "== round $r base --window 32768,-1"
  timeout 60 $B/goflash_base bench --seqlens 4096,8192,16384 --headdims 64,128 --causal false --reps 20 --warmup 5 --window 32768,-1 --out /tmp/b 2>&1 | grep -E "^ +fwd"
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
cd flashattn || exit 1
for v in v5 nopp; do
  timeout 150 $B/flashattn_$v.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$/.*alibi' -test.v -test.count=1 >"$OUT/test_$v.txt" 2>&1; echo "test $v rc=$? $((SECONDS-t0))s"
  grep -cE "^\s*--- PASS" "$OUT/test_$v.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_$v.txt" | head -10
  for tool in memcheck synccheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_$v.test -test.run 'TestGPUHopperForward/alibi' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/${tool}_$v.txt"; echo "$tool $v rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
  done
done
echo "all done $((SECONDS-t0))s"
