#!/usr/bin/env bash
# session 12, call 2: Hopper forward candidates (cubins built from copies of kernels/ by
# nvcc 12.4 -cubin, as build.sh does) checked and timed in one process beside the source
# as compiled into fwd_check90a (tpl) and the working tree's fa2_sm90a.cubin (cubin):
#   base  the first build of call 1 (mask on every step, rescale after the P V wait)
#   b     + unmasked steps apart from the masked ones
#   ab    + FA3's order (S_n issued before O's rescale and P_{n-1} V_{n-1})
#   tpl/cubin: ab + the softmax pinned ahead of the P V wait (a shared store of l)
#   s176  that with D128 Bc 176 and D64 Br 128 (2 consumers); s3: 3 K/V stages
# then the Go Hopper tests with the raw fallback fixed.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc .build/s12/p2.tar.xz | tar -xf - -C /tmp
T64=64:192:128:2; T128=128:128:128:2
echo "== sm90a $(date -u +%T)"
timeout 120 /tmp/fwd_check90a sm90a internal/kernels \
  base=.build/s12/base.cubin,$T64,$T128 b=.build/s12/c_b.cubin,$T64,$T128 ab=.build/s12/c_ab.cubin,$T64,$T128 \
  s176=.build/s12/c_s176.cubin,64:128:128:2,128:128:176:2 s3=.build/s12/c_s3.cubin,64:192:128:3,128:128:128:3 \
  > "$OUT/sm90a.log" 2>&1; rc=$?; echo "rc $rc"
grep -E "^(check|FAIL|all)" "$OUT/sm90a.log"
grep -E "^bench" "$OUT/sm90a.log" | awk '{printf "%-6s %-26s %s %s %s %s\n", $2, $3, $6, $7, $8, $12}'
echo "== go $(date -u +%T)"
(cd flashattn && timeout 120 /tmp/flashattn.test -test.run 'TestGPUHopperForward|TestHopperKernelTable|TestGPURawConformance$' -test.v > "$OUT/gotest.log" 2>&1); echo "rc $?"
grep -E "^(--- |ok|FAIL|PASS|panic)" "$OUT/gotest.log" | tail; grep -B2 -A12 -- "--- FAIL" "$OUT/gotest.log" | head -40
echo "== end $(date -u +%T)"
