#!/usr/bin/env bash
# Session 27, call 1 (carry .build/c1/b.tar.xz): ALiBi's column term from S's GEMM in the Hopper
# ALiBi kernels without the softcap (one more k16 wgmma step: A = side*slope in two fp16 halves,
# B = the key's offset in its block; the block's constant in the softmax's max). goflash_X embeds
# fa2_sm90a.cubin X: base = main's cubin, bias = this change. goflash bench interleaved, two
# rounds; then the Go Hopper and conformance tests and the sanitizers on the bias build.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--alibi" "--alibi --window 2048,-1"; do
    for g in base bias; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 60 $B/goflash_$g bench --seqlens 2048,8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"
awk '/^== round/{g=$4; m=$5" "$6" "$7; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/mods_ab.txt" | sort -s -k1,7 > "$OUT/summary.txt"; cat "$OUT/summary.txt"
cd flashattn || exit 1
timeout 200 $B/flashattn_bias.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test_bias.txt" 2>&1; echo "test bias rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_bias.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_bias.txt" | head -10
for tool in memcheck synccheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_bias.test -test.run 'TestGPUHopperForward/alibi' -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/$tool.txt"; echo "$tool rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
echo "all done $((SECONDS-t0))s"
