#!/usr/bin/env bash
# one H200 call for branch decode2 (paged-fix kernels, tile candidates, sm_75 sanitizers)
here=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
date -u +%FT%TZ >> "$OUT/gpu.txt"
timeout 45 python3 $here/root/kernels/dev/decode_sidebyside.py --tiles $here/decode_tiles.cubin > "$OUT/tiles.txt" 2>&1; echo "tiles rc $?" >> "$OUT/gpu.txt"
cd $here/root/flashattn
timeout 30 $here/flashattn.test -test.run 'KVCache|Decode' -test.v > "$OUT/gotest.txt" 2>&1; echo "gotest rc $?" >> "$OUT/gpu.txt"
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool $here/flashattn.test -test.run 'TestGPUKVCacheConformance/path75-splits3' -test.v > "$OUT/sanitizer75-$tool.txt" 2>&1
  echo "$tool rc $?" >> "$OUT/gpu.txt"
done
date -u +%FT%TZ >> "$OUT/gpu.txt"
tail -3 "$OUT"/*.txt
