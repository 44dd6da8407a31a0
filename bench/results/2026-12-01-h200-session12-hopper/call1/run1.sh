#!/usr/bin/env bash
# session 12, call 1: the Hopper forward (fa2_sm90a.cu, D64 and D128) checked and timed in
# fwd_check90a beside the fatbin's sm_80 kernels, SDPA flash and cuDNN on the same shapes,
# the Go suites on the Hopper and forced sm_80 paths, compute-sanitizer on the check.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc .build/s12/p.tar.xz | tar -xf - -C /tmp
echo "== sm90a $(date -u +%T)"
timeout 60 /tmp/fwd_check90a sm90a internal/kernels > "$OUT/sm90a.log" 2>&1; rc=$?; echo "rc $rc"
grep -E "^(check|FAIL|bench|all)" "$OUT/sm90a.log" | tail -70
echo "== sdpa $(date -u +%T)"
timeout 60 python3 bench/sdpa.py .build/s12/spec.json > "$OUT/sdpa.json" 2> "$OUT/sdpa.log"; echo "rc $?"
tail -20 "$OUT/sdpa.log"
echo "== go $(date -u +%T)"
(cd flashattn && timeout 220 /tmp/flashattn.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPUConformance$|TestGPUConformanceSM80|TestGPURawConformance$|TestGPURawConformanceSM80' -test.v > "$OUT/gotest.log" 2>&1); echo "rc $?"
grep -E "^(--- |ok|FAIL|PASS|panic)" "$OUT/gotest.log" | grep -v "^    --- PASS" | tail -30; grep -c -- "--- PASS" "$OUT/gotest.log"; grep -B2 -A8 -- "--- FAIL" "$OUT/gotest.log" | head -60
if [ "$rc" = 0 ]; then
echo "== memcheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool memcheck /tmp/fwd_check90a sm90a-check internal/kernels > "$OUT/memcheck.log" 2>&1; echo "rc $?"
tail -4 "$OUT/memcheck.log"
echo "== racecheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool racecheck /tmp/fwd_check90a sm90a-check internal/kernels > "$OUT/racecheck.log" 2>&1; echo "rc $?"
tail -4 "$OUT/racecheck.log"
fi
echo "== end $(date -u +%T)"
