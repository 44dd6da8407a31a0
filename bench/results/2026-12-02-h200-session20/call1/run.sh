#!/usr/bin/env bash
# Session 20, call 1 (carry .build/c1/b.tar.xz): (1) the KV-cache Go tests with the D256 decode case
# (test binary of main 58a1ee7, fa2.fatbin reduced to its sm_90 image); (2) the Hopper D64 modified
# forward at Bc 128 without the intra-warpgroup overlap (session 19's hopper-d64-mod-bc128-seq.diff:
# goflash_c1 2 stages, goflash_c2 4 stages) against the committed cubin (goflash_base), goflash
# bench interleaved, two rounds; (3) the bare-read floor of decode's bytes (dev/readfloor.py);
# (4) session 19's call 8 dev script (D64 decode tiles; split counts for few kv heads).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1; R=bench/results/2026-12-02-h200-session20
mkdir -p "$OUT" $B .build/c8; xz -dc .build/c1/b.tar.xz | tar -xf - -C $B; cp $B/d64*.cubin .build/c8/
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 200 $B/flashattn.test -test.run 'KVCache|Decode|PageMultiple' -test.v -test.count=1 > $OUT/tests.txt 2>&1; echo "rc=$? $((SECONDS-t0))s" >> $OUT/tests.txt)
grep -cE -- "--- PASS" $OUT/tests.txt; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^ +--- FAIL|d256" $OUT/tests.txt | head -30
for r in 1 2; do
  for m in "--softcap 30" "--alibi" "--window 8192,-1" ""; do
    for g in base c1 c2; do
      echo "== round $r $g $m"
      # shellcheck disable=SC2086
      timeout 40 $B/goflash_$g bench --seqlens 8192 --headdims 64 --causal both --reps 20 --warmup 5 $m --out /tmp/b 2>&1 | grep -E "^ +fwd|gpu-mod|ours"
    done
  done
done > "$OUT/mods_ab.txt" 2>&1
echo "bench done $((SECONDS-t0))s"; grep -E "^==|8192" "$OUT/mods_ab.txt" | head -80
PYTHONUNBUFFERED=1 timeout 150 python3 $R/dev/readfloor.py $B/readfloor.cubin 2>&1 | grep -v -i "warn\|return F" | tee $OUT/readfloor.txt
echo "readfloor done $((SECONDS-t0))s"
{ PYTHONUNBUFFERED=1 timeout 100 python3 bench/results/2026-12-02-h200-session19-decode/call8-not-run/dev8.py B 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/tiles.txt; cat $OUT/tiles.txt
{ PYTHONUNBUFFERED=1 timeout 90 python3 bench/results/2026-12-02-h200-session19-decode/call8-not-run/dev8.py A 2>&1 | grep -v -i "warn\|return F"; echo "rc=$? $((SECONDS-t0))s"; } > $OUT/sweep.txt; cat $OUT/sweep.txt
