#!/usr/bin/env bash
# Session 29, call 5 (carry .build/s29: b2.tar.xz): the Hopper D64 ALiBi kernel's variants, goflash_X embeds
# fa2_sm90a.cubin X: base = main's; fadd64 = D64 takes apply_side's FADD per score, not the bias k16 GEMM step;
# sinit = S's first wgmma write-only (wgmma_ss_init) in the D64 ALiBi kernel too; sinitall = in every
# non-overlapped (D64) modified kernel; faddsinit = both. Each changes only the named D64 kernels' SASS.
# goflash bench interleaved, two rounds, N 4096 / 8192 D64; then the winners' ALiBi tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c5
mkdir -p "$OUT" $B; xz -dc .build/s29/b2.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
for r in 1 2; do
  for m in "--alibi" "--window 32768,-1"; do
    for g in base fadd64 sinit sinitall faddsinit; do
      [[ $m == --window* && $g != base && $g != sinitall ]] && continue
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 4096,8192 --headdims 64 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd"
    done
  done
  echo "bench round $r done $((SECONDS-t0))s" >&2
done > "$OUT/bench_ab.txt" 2>&1
awk '/^== round/{g=$4; m=$5" "$6; next} /^ +fwd/{print m, "N"$4, "D"$2, $3, g, $7, $8}' "$OUT/bench_ab.txt" | sort -s -k1,6 > "$OUT/summary.txt"
cat "$OUT/summary.txt"
echo "bench done $((SECONDS-t0))s"
cd flashattn || exit 1
for g in fadd64 sinit sinitall faddsinit; do
  { timeout 60 $B/flashattn_$g.test -test.run 'TestGPUHopperForward/(alibi|mods).*d64' -test.v -test.count=1
    timeout 60 $B/flashattn_$g.test -test.run 'TestGPUConformance$/.*(alibi|window)' -test.v -test.count=1; } >"$OUT/test_$g.txt" 2>&1; echo "test $g rc=$? $((SECONDS-t0))s pass $(grep -cE '^\s*--- PASS' "$OUT/test_$g.txt") fail $(grep -cE '^\s*--- FAIL' "$OUT/test_$g.txt")"
done
tar -cJf "$OUT/tests.tar.xz" -C "$OUT" test_fadd64.txt test_sinit.txt test_sinitall.txt test_faddsinit.txt && rm "$OUT"/test_*.txt
echo "all done $((SECONDS-t0))s"
