#!/usr/bin/env bash
# session 12, call 4: a persistent Hopper forward (one CTA per SM walks the tiles; the producer
# loads the next tile's Q and K/V while the consumers finish the last one) beside the working
# tree's (tpl, cubin: the same SASS, so their gap is the noise), shape-major, two rounds:
#   per   persistent, tiles as shipped (D64 192x128 spills 132 B under 160 registers)
#   per2  persistent, D64 as 128x128 (2 consumers, 240 registers)
set -uo pipefail
cd "$(dirname "$0")/../.."   # repository root
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
xz -dc .build/s12/p4.tar.xz | tar -xf - -C /tmp
echo "== sm90a $(date -u +%T)"
timeout 250 /tmp/fwd_check90a sm90a internal/kernels \
  per=.build/s12/c_per.cubin,64:192:128:2:p,128:128:128:2:p per2=.build/s12/c_per2.cubin,64:128:128:2:p,128:128:128:2:p \
  > "$OUT/sm90a.log" 2>&1; rc=$?; echo "rc $rc"
grep -E "^(check|FAIL|all)" "$OUT/sm90a.log"; grep -E "FAIL" "$OUT/sm90a.log" | head
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
if [ "$rc" = 0 ]; then
echo "== memcheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool memcheck /tmp/fwd_check90a sm90a-check internal/kernels per2=.build/s12/c_per2.cubin,64:128:128:2:p,128:128:128:2:p > "$OUT/memcheck.log" 2>&1; echo "rc $?"
tail -3 "$OUT/memcheck.log"
echo "== racecheck $(date -u +%T)"
timeout 100 compute-sanitizer --tool racecheck /tmp/fwd_check90a sm90a-check internal/kernels per2=.build/s12/c_per2.cubin,64:128:128:2:p,128:128:128:2:p > "$OUT/racecheck.log" 2>&1; echo "rc $?"
tail -3 "$OUT/racecheck.log"
fi
echo "== end $(date -u +%T)"
