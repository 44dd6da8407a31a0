#!/usr/bin/env bash
# Session 28, call 3 (carry .build/s28/b3.tar.xz): the shipped fa2_sm90a.cubin (call 2's ppcap, byte
# for byte: the uniform warpgroup index in the causal and modified kernels, FA3's ping-pong in the D128
# softcap kernels too), fa2.fatbin reduced to its sm_90 image. goflash check; the Hopper tests, the
# softcap conformance cases and the sanitizers; then the FA2 paper sweep beside PyTorch SDPA.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/s28/b3.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 60 $B/goflash check > "$OUT/check.txt" 2>&1; echo "check rc=$? $((SECONDS-t0))s"; tail -1 "$OUT/check.txt"
(cd flashattn && timeout 170 $B/flashattn.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$/.*softcap' -test.v -test.count=1 >"$OUT/test.txt" 2>&1); echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test.txt" | head -10
for tool in memcheck synccheck racecheck; do
  (cd flashattn && timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/flashattn.test -test.run 'TestGPUHopperForward/mods-d128' -test.count=1 2>&1) | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)|--- FAIL" | tee "$OUT/$tool.txt"; echo "$tool rc=${PIPESTATUS[0]} $((SECONDS-t0))s"
done
timeout 230 $B/goflash bench --compare-torch --with-sm80 --out "$OUT/paper" >"$OUT/bench.txt" 2>&1; echo "paper rc=$? $((SECONDS-t0))s"
echo "all done $((SECONDS-t0))s"
