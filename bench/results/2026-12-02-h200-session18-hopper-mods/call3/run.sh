#!/usr/bin/env bash
# Session 18, call 3: the D64 modified Hopper tile at Bc 80 (Br 192, 4 stages; no spills) and the
# plain kernels in TileOrder's grouped order. goflash_NAME: the same Go tree (fa2.fatbin reduced
# to its sm_90 image), with the cubin and table_gen.go of:
#   base  the committed cubin (D64 modified tile Bc 64)
#   f     the D64 modified tile Br 192 / Bc 80 / 4 stages (wgmma m64n80k16)
#   g     f + every kernel in the grouped order (TileOrder's kUnequal true: the plain
#         non-causal kernels took the (b, h)-major order)
# goflash bench interleaved; the Go Hopper and conformance tests and memcheck on g.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/s18; mkdir -p "$OUT" $B
xz -dc .build/s18.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 8192,-1" "--window 2048,-1"; do
    for g in base f g; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 60 $B/goflash_$g bench --seqlens 2048,8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
    done
  done
  for g in base g; do
    echo "== round $r $g plain"
    timeout 60 $B/goflash_$g bench --seqlens 4096,16384 --headdims 64,128 --causal false --reps 20 --warmup 5 --out /tmp/b 2>&1 | grep -E "^ +fwd|ours"
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7; next} /^ +fwd/{print m, "D"$2, $3, "N"$4, g, $8, "(plain "$7")"}' "$OUT/mods_ab.txt" | sort -s -k1,4 > "$OUT/summary.txt"
cd flashattn || exit 1
timeout 150 $B/flashattn_g.test -test.run 'TestGPUHopperForward|TestGPUHopperKernelTable|TestGPUConformance$' -test.v -test.count=1 >"$OUT/test_g.txt" 2>&1; echo "test rc=$?"
timeout 100 $B/flashattn_g.test -test.run 'TestGPUHopperFewCTAs' -test.v -test.count=1 >"$OUT/test_g_few.txt" 2>&1; echo "test few rc=$?"
for f in test_g test_g_few; do grep -cE "^\s*--- PASS" "$OUT/$f.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/$f.txt" | head -20; done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/flashattn_g.test -test.run 'TestGPUHopperForward/(mods|alibi)-d64' -test.v >"$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?"; tail -3 "$OUT/memcheck.txt"
echo "all done $((SECONDS-t0))s"
