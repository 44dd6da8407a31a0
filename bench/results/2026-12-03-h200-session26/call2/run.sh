#!/usr/bin/env bash
# Session 26, call 2 (carry .build/c2/b.tar.xz): the Turing D256 forward with Q^T's B fragments in
# registers for the whole loop (WarpN8's QRegs; session 22's candidate `qr`), on the forced sm_75
# path (fa2_sm75.fatbin's PTX, JIT-compiled on the H200). goflash_base embeds main's fa2_sm75.fatbin,
# goflash_qr and flashattn_qr.test this commit's. (1) goflash bench --force-arch 75 at D256, the two
# builds interleaved, two rounds, and the modifiers once; (2) TestGPUConformanceSM75 whole (every
# suite and packed case at D256, forward and backward); (3) goflash check (the device's kernels and
# the forced Turing ones, D256 backward included); (4) memcheck and racecheck on four D256 cases.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c2
mkdir -p "$OUT" $B; xz -dc .build/c2/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for g in base qr; do
    echo "== round $r $g"
    timeout 60 $B/goflash_$g bench --force-arch 75 --seqlens 1024,4096,16384 --headdims 256 --causal both --reps 10 --warmup 3 --out /tmp/b 2>&1 | grep -E "^ +fwd"
  done
done > "$OUT/ab.txt" 2>&1
for g in base qr; do
  echo "== mods $g"
  timeout 60 $B/goflash_$g bench --force-arch 75 --seqlens 4096 --headdims 256 --causal both --reps 10 --warmup 3 --window 1024,-1 --softcap 30 --alibi --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod"
done >> "$OUT/ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"; cat "$OUT/ab.txt"
cd flashattn || exit 1
timeout 280 $B/flashattn_qr.test -test.run 'TestGPUConformanceSM75' -test.v -test.count=1 >"$OUT/test_sm75.txt" 2>&1; echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_sm75.txt"; grep -cE "^\s*--- PASS.*D256" "$OUT/test_sm75.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_sm75.txt" | head -10
cd ..
timeout 120 $B/goflash_qr check > "$OUT/check.txt" 2>&1; echo "check rc=$? $((SECONDS-t0))s"; tail -25 "$OUT/check.txt"
cd flashattn || exit 1
sel='TestGPUConformanceSM75/fwd\+bwd/(N97-causal-gqa8-D256|alibi-softcap10-N130-D256|Nq97-Nk17-causal-gqa8-at-D256|window-l16-r8-N97-at-D256)$'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn_qr.test -test.run "$sel" -test.v -test.count=1 > "$OUT/$tool.txt" 2>&1; echo "$tool rc=$? $((SECONDS-t0))s"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- (FAIL|PASS)" "$OUT/$tool.txt" | tail -8
done
echo "all done $((SECONDS-t0))s"
