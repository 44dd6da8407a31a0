#!/usr/bin/env bash
# hopper2: one H200 call: the warp-specialised sm_90a forward (kernels/dev/fwd_sm90_ws.cuh)
# checked and timed beside the first candidate and the fatbin's mma.sync kernel, SDPA flash
# and cuDNN on the same shapes, then compute-sanitizer memcheck and racecheck of its check.
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc .build/hopper2/fwd_check90a.xz > /tmp/fwd_check90a && chmod +x /tmp/fwd_check90a
echo "== sm90a $(date -u +%T)"
timeout 45 /tmp/fwd_check90a sm90a internal/kernels > "$OUT/sm90a.log" 2>&1; rc=$?; echo "rc $rc"
tail -40 "$OUT/sm90a.log"
echo "== sdpa $(date -u +%T)"
timeout 50 python3 bench/sdpa.py .build/hopper2/spec.json > "$OUT/sdpa.json" 2> "$OUT/sdpa.log"; echo "rc $?"
tail -12 "$OUT/sdpa.log"
if [ "$rc" = 0 ]; then
echo "== memcheck $(date -u +%T)"
timeout 45 compute-sanitizer --tool memcheck /tmp/fwd_check90a sm90a-check internal/kernels > "$OUT/memcheck.log" 2>&1; echo "rc $?"
tail -4 "$OUT/memcheck.log"
echo "== racecheck $(date -u +%T)"
timeout 30 compute-sanitizer --tool racecheck /tmp/fwd_check90a sm90a-check internal/kernels > "$OUT/racecheck.log" 2>&1; echo "rc $?"
tail -4 "$OUT/racecheck.log"
fi
echo "== end $(date -u +%T)"
cp .build/hopper2/run.sh .build/hopper2/spec.json "$OUT/"
