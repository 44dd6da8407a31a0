#!/usr/bin/env bash
# Session 27, call 3 (carry .build/c3/b.tar.xz): the shipped build (fa2_sm90a.cubin as build.sh
# makes it, byte-identical to call 2's v5): the Go Hopper, conformance and raw tests, goflash check
# (the device's kernels and the forced Turing ones), and one more bench round beside main's cubin.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for g in base v5 base v5; do
  echo "== $g --alibi"
  timeout 60 $B/goflash_$g bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 --alibi --out /tmp/b 2>&1 | grep -E "^ +fwd"
done > "$OUT/mods_ab.txt" 2>&1
cat "$OUT/mods_ab.txt"; echo "bench done $((SECONDS-t0))s"
timeout 60 $B/goflash_v5 check > "$OUT/check.txt" 2>&1; echo "check rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/check.txt"
cd flashattn || exit 1
timeout 300 $B/flashattn_v5.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPURawConformance$' -test.v -test.count=1 >"$OUT/test.txt" 2>&1; echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)|^--- " "$OUT/test.txt" | head -10
echo "all done $((SECONDS-t0))s"
