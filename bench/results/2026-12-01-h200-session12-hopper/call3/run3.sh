#!/usr/bin/env bash
# session 12, call 3: Hopper candidates timed shape-major (every kernel of a shape in turn,
# two rounds, best median each: clocks drift over a run), from copies of kernels/ built by
# nvcc 12.4 -cubin as build.sh does:
#   tpl / cubin  the working tree (FA3's order, unmasked steps apart, softmax pinned ahead of the P V wait)
#   pc     + a causal consumer stops at its own rows' last block (later stages released unread)
#   t176   D128 Bc 176;  t3: D64 3 K/V stages;  pc176: pc with D128 Bc 176
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
xz -dc .build/s12/p3.tar.xz | tar -xf - -C /tmp
T64=64:192:128:2; T128=128:128:128:2
echo "== sm90a $(date -u +%T)"
timeout 200 /tmp/fwd_check90a sm90a internal/kernels \
  pc=.build/s12/c_pc.cubin,$T64,$T128 t176=.build/s12/c_t176.cubin,$T64,128:128:176:2 \
  t3=.build/s12/c_t3.cubin,64:192:128:3,$T128 pc176=.build/s12/c_pc176.cubin,$T64,128:128:176:2 \
  > "$OUT/sm90a.log" 2>&1; rc=$?; echo "rc $rc"
grep -E "^(check|FAIL|all)" "$OUT/sm90a.log"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== end $(date -u +%T)"
