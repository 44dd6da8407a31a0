#!/usr/bin/env bash
# Session 20, call 3 (carry .build/c3/b.tar.xz): the Hopper D64 modified tile as committed next
# (Tile90 without the overlap, Bc 128 / 4 stages; S's first k16 wgmma write-only with the softcap):
#   c6  kSInit = !kOverlap && kCap (this tree's kernels)
#   c7  kSInit = !kOverlap && kCap && !kALiBi (the softcap + ALiBi kernel without it)
# against the committed cubin (base), goflash bench interleaved, two rounds, D64, N 8192 (D128 and
# the plain kernels' SASS are unchanged); the Go Hopper tests on c6, memcheck of its D64 modified cases.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 8192,-1" "--window 2048,-1" ""; do
    for g in base c6 c7; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7" "$8; next} /^ +fwd/{print m, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
cd flashattn || exit 1
timeout 280 $B/flashattn_c6.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test_c6.txt" 2>&1; echo "test c6 rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_c6.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_c6.txt" | head -10
for v in c6 c7; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn_$v.test -test.run 'TestGPUHopperForward/(mods|alibi)-d64' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee -a "$OUT/memcheck.txt"; echo "memcheck $v rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
