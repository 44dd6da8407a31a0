#!/usr/bin/env bash
# Session 21, call 3 (carry .build/c3/b.tar.xz: flashattn.test of this commit's tree, its fa2.fatbin cut to
# the sm_90 image; the tree's internal/kernels holds the rebuilt fa2.fatbin, fa2_sm75.fatbin, resources.md):
# the Turing D256 decode kernel (fa2_decode_sm75_d256, 8 packed rows, DecodeWarpN8) and every other decode
# kernel: the KV-cache conformance on both paths (the Turing one from its PTX), then compute-sanitizer
# memcheck and racecheck of the Turing kernels' small calls (every head dim, 1/3/40 splits, paged, modifiers).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c3; D=kernels/dev/decode_sidebyside.py
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 240 $B/flashattn.test -test.run 'KVCache|Decode|PageMultiple' -test.v -test.count=1 > "$OUT/go_tests.txt" 2>&1); echo "go rc=$? $((SECONDS-t0))s"
echo "PASS $(grep -cE '^\s*--- PASS' "$OUT/go_tests.txt") FAIL $(grep -cE '^\s*--- FAIL' "$OUT/go_tests.txt") SKIP $(grep -cE '^\s*--- SKIP' "$OUT/go_tests.txt")"
grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/go_tests.txt" | head; grep -E -- "--- PASS.*d256" "$OUT/go_tests.txt" | head -8
timeout 150 compute-sanitizer --tool memcheck python3 $D --ptx75 --sanitize > "$OUT/san_mem_ptx75.txt" 2>&1; echo "memcheck rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/san_mem_ptx75.txt"
timeout 200 compute-sanitizer --tool racecheck python3 $D --ptx75 --sanitize > "$OUT/san_race_ptx75.txt" 2>&1; echo "racecheck rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/san_race_ptx75.txt"
