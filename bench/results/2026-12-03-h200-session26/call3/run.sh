#!/usr/bin/env bash
# Session 26, call 3 (carry .build/c3/b.tar.xz): the Turing D128 backward on 8 warps with column groups
# (session 25's ColGroups, two warps sharing each 16 owned rows, 64 columns each), forced sm_75 path.
# goflash_X embeds fa2_sm75.fatbin and table_gen.go of traits.cuh with dev/X.diff:
#   base  main: dK/dV (64 keys, 32 queries, 4 warps, chunk 16), dQ (64 queries, 64 keys, 4 warps)
#   A     dK/dV (64, 32, 8 warps, chunk 16, 2 column groups), dQ (64, 32, 8 warps, chunk 16, 2 groups)
#   B     A with dK/dV's chunk 32
#   C     A with dQ streaming 48 keys
# (1) goflash bench --force-arch 75 --direction bwd at D128, interleaved, two rounds; (2) on A the
# Go tests that run the Turing backward (conformance, modified, packed, device), then memcheck and
# racecheck on three D128 cases.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for g in base A B C; do
    echo "== round $r $g"
    timeout 60 $B/goflash_$g bench --force-arch 75 --direction bwd --headdims 128 --seqlens 1024,4096,16384 --causal both --reps 10 --warmup 3 --out /tmp/b 2>&1 | grep -E "^ +bwd"
  done
done > "$OUT/ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"; cat "$OUT/ab.txt"
cd flashattn || exit 1
timeout 330 $B/flashattn_A.test -test.run 'TestGPUConformanceSM75|TestGPUModifiedBackwardKernels|TestGPUVarlenConformance|TestGPUBackwardDevice' -test.v -test.count=1 >"$OUT/test_A.txt" 2>&1; echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_A.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_A.txt" | head -10
sel='TestGPUConformanceSM75/fwd\+bwd/(Nq17-Nk97-causal|window-l100-r20-softcap20-N300-D128|alibi-causal-N400-D128)$'
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_A.test -test.run "$sel" -test.v -test.count=1 > "$OUT/$tool.txt" 2>&1; echo "$tool rc=$? $((SECONDS-t0))s"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- (FAIL|PASS)" "$OUT/$tool.txt" | tail -6
done
echo "all done $((SECONDS-t0))s"
