#!/usr/bin/env bash
# Session 21, call 2 (carry .build/c2/b.tar.xz): the decode kernels with both warp forms (dual: DecodeWarpN8
# where a tile's live packed rows are <= 8, DecodeWarpM16 otherwise; sm_80 path, D <= 128) against main's (orig).
#  (a) Go: flashattn.test built on a fatbin of this tree (sm_90 SASS + the Turing PTX fatbin, both rebuilt):
#      the KV-cache conformance on both paths (the sm_75 one from its PTX) and the rule tests;
#  (b) dev harness on dual.cubin: every bench shape checked, the modifiers (D128/D64, Nq 1/2), memcheck;
#  (c) A/B interleaved beside cuDNN, each build also on the (B, Hkv, N, D) cache cuDNN reads (--hnd).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c2; D=kernels/dev/decode_sidebyside.py
mkdir -p "$OUT" $B; xz -dc .build/c2/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 200 $B/flashattn_dual.test -test.run 'KVCache|Decode|PageMultiple' -test.v -test.count=1 > "$OUT/go_tests.txt" 2>&1); echo "go rc=$? $((SECONDS-t0))s"
echo "PASS $(grep -cE '^\s*--- PASS' "$OUT/go_tests.txt") FAIL $(grep -cE '^\s*--- FAIL' "$OUT/go_tests.txt") SKIP $(grep -cE '^\s*--- SKIP' "$OUT/go_tests.txt")"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/go_tests.txt" | head
{ timeout 150 python3 $D --module $B/dual.cubin; echo "rc=$?"; timeout 100 python3 $D --module $B/dual.cubin --mods; echo "rc=$?"; } 2>&1 | grep -v "Warning\|return F" > "$OUT/check.txt"
echo "check $((SECONDS-t0))s"; grep -E "FAIL|within|rc=" "$OUT/check.txt"
timeout 120 compute-sanitizer --tool memcheck python3 $D --module $B/dual.cubin --sanitize > "$OUT/san.txt" 2>&1; echo "san rc=$? $((SECONDS-t0))s"; tail -1 "$OUT/san.txt"
timeout 250 python3 $D --module $B/dual.cubin --ab $B/orig.cubin --hnd 2>&1 | grep -v "Warning\|return F" > "$OUT/ab_hnd.txt"; echo "ab rc=$? $((SECONDS-t0))s"; cat "$OUT/ab_hnd.txt"
