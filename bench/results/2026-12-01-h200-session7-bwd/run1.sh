#!/usr/bin/env bash
# session 7 call 1: compiler comparison (bwd 11.8 vs 12.4; fwd 12.4 vs fatbin), torch kernel-level, Go bench fwdbwd one call
set -uo pipefail
B=.build/s7; mkdir -p $OUT
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
for c in 118 124; do
  BWD_BENCH=1 BWD_ONLY="${BWD_ONLY:-_large}" timeout 100 $B/bwd_check$c internal/kernels > $OUT/bwdbench$c.log 2>&1; echo "bwd$c rc=$?"
done
paste <(grep ^bench $OUT/bwdbench118.log | awk '{print $2,$3,$4,$6}') <(grep ^bench $OUT/bwdbench124.log | awk '{print $4,$6}')
timeout 150 $B/fwd_check124 bench internal/kernels $OUT > $OUT/fwdbench124.log 2>&1; echo "fwd124 rc=$?"; grep -iE "tflop|fail" $OUT/fwdbench124.log | head -70
PYTHONUNBUFFERED=1 timeout 150 python3 $B/prof.py > $OUT/prof.log 2>&1; echo "prof rc=$?"; cut -c1-400 $OUT/prof.log
timeout 200 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "bench rc=$?"
grep -A60 "^goflash bench on" $OUT/bench_fwdbwd.txt
cd $OUT && tar czf /tmp/o.tgz . && mv /tmp/o.tgz $OUT/out.tgz
