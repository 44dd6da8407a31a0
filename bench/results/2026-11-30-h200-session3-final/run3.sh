#!/usr/bin/env bash
# Lead run 3 (session 3, final): main after all merges: GPU tests, sanitizers on the new kernels,
# fwd/bwd beside SDPA, decode beside SDPA.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=.build/lead
date -u | tee "$OUT/date.txt"; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$OUT/date.txt"
(cd $L && tar -xJf bins.tar.xz) || exit 9
t=$SECONDS; (cd flashattn && timeout 240 "../$L/flashattn.test" -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode' -test.v -test.count=1 -test.timeout 230s) > "$OUT/gpu-tests.txt" 2>&1
echo "go gpu tests rc=$? $((SECONDS-t))s"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL" "$OUT/gpu-tests.txt" | head -20; grep "µs" "$OUT/gpu-tests.txt"
t=$SECONDS
for tool in memcheck racecheck; do
  (cd flashattn && timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "../$L/flashattn.test" -test.run 'TestGPUConformance$/(window-l16|alibi-window|alibi-softcap10|window-l100)' -test.count=1) > "$OUT/san-mask-$tool.txt" 2>&1; echo "mask $tool rc=$?"; tail -2 "$OUT/san-mask-$tool.txt"
  (cd flashattn && timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "../$L/flashattn.test" -test.run 'TestGPUKVCacheConformance/path0-splits3' -test.count=1) > "$OUT/san-decode-$tool.txt" 2>&1; echo "decode $tool rc=$?"; tail -2 "$OUT/san-decode-$tool.txt"
  (cd flashattn && timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "../$L/flashattn.test" -test.run 'TestGPUBackwardPaths' -test.count=1) > "$OUT/san-bwdpaths-$tool.txt" 2>&1; echo "bwd paths $tool rc=$?"; tail -2 "$OUT/san-bwdpaths-$tool.txt"
done; echo "sanitizers $((SECONDS-t))s"
t=$SECONDS; timeout 150 $L/goflash bench --compare-torch --direction both --seqlens 2048,4096,8192 --headdims 64,128 --reps 10 --warmup 3 --out "$OUT/bench" --sdpa bench/sdpa.py --no-report > "$OUT/bench.txt" 2>&1; echo "bench rc=$? $((SECONDS-t))s"; grep -A40 "^ *dir" "$OUT/bench.txt"
t=$SECONDS; timeout 100 $L/goflash bench --decode --compare-torch --peak-tbps 4.8 --out "$OUT/decode" --sdpa bench/sdpa.py --no-report > "$OUT/decode.txt" 2>&1; echo "decode rc=$? $((SECONDS-t))s"; grep -A14 "decode bandwidth" "$OUT/decode.txt"
t=$SECONDS; timeout 100 $L/goflash bench --decode --page 16 --compare-torch --peak-tbps 4.8 --out "$OUT/decode-paged" --sdpa bench/sdpa.py --no-report > "$OUT/decode-paged.txt" 2>&1; echo "decode paged rc=$? $((SECONDS-t))s"; grep -A14 "decode bandwidth" "$OUT/decode-paged.txt"
