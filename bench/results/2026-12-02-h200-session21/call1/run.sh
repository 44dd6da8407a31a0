#!/usr/bin/env bash
# Session 21, call 1 (carry .build/c1/b.tar.xz):
#  (a) decode with the packed rows as the mma's n8 columns (DecodeWarpN8, dev cubin r8 = kernels/ of this
#      call's tree with kRows 8 on the sm_80 path; r16 = the same tree with kRows 16; orig = main's
#      decode.cuh): correctness on every bench shape (contiguous and paged), the modifiers (D128/D64,
#      Nq 1/2), compute-sanitizer, then A/B interleaved beside cuDNN;
#  (b) session 20's prepared g1 (ALiBi's |distance| form in the Hopper kernels without the overlap).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1; D=kernels/dev/decode_sidebyside.py
mkdir -p "$OUT" $B; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
timeout 150 python3 $D --module $B/r8.cubin --rows 8 > "$OUT/bench_r8.txt" 2>&1; echo "bench rc=$? $((SECONDS-t0))s"; tail -3 "$OUT/bench_r8.txt"
timeout 100 python3 $D --module $B/r8.cubin --rows 8 --mods > "$OUT/mods_r8.txt" 2>&1; echo "mods rc=$? $((SECONDS-t0))s"; grep -E "FAIL|within" "$OUT/mods_r8.txt"
timeout 120 compute-sanitizer --tool memcheck python3 $D --module $B/r8.cubin --rows 8 --sanitize > "$OUT/san_r8.txt" 2>&1; echo "san rc=$? $((SECONDS-t0))s"; tail -2 "$OUT/san_r8.txt"
timeout 200 python3 $D --module $B/r8.cubin --rows 8 --ab $B/r16.cubin,$B/orig.cubin > "$OUT/ab.txt" 2>&1; echo "ab rc=$? $((SECONDS-t0))s"; cat "$OUT/ab.txt"
for r in 1 2; do for g in base g1; do
  echo "== round $r $g --alibi"
  timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64 --causal both --reps 20 --warmup 5 --alibi --out /tmp/b 2>&1 | grep -E "^ +fwd"
done; done | tee "$OUT/mods_g1.txt"
cd flashattn || exit 1
timeout 100 $B/flashattn_g1.test -test.run 'TestGPUHopperForward/alibi-d64|TestGPUConformance/alibi' -test.v -test.count=1 >"$OUT/test_g1.txt" 2>&1; echo "test g1 rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test_g1.txt"; grep -E "^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test_g1.txt" | head -10
