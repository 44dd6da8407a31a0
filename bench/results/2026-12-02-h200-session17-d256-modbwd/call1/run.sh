#!/usr/bin/env bash
# Session 17, call 1: the modified single pass at D 256 and D256's varlen backward (c5e7723): Go tests,
# goflash bench, compute-sanitizer, FlexAttention. Binaries built with an sm_90-only fa2.fatbin (the carry's size).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/f; mkdir -p "$OUT" $B
xz -dc .build/s17/f.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
(cd flashattn && timeout 240 $B/flashattn.test -test.run 'TestGPUModifiedBackwardKernels|TestGPUConformanceBackward|TestGPUConformanceBF16Backward|TestGPUConformanceSM80|TestGPUConformanceSM75|TestGPUVarlen|TestGPUAutoAndReasons' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/tests.txt")
grep -cE -- "--- PASS" "$OUT/tests.txt"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic|rc=)|^    --- FAIL|^        --- FAIL|^--- (PASS|FAIL)" "$OUT/tests.txt" | head -30
G="timeout 60 $B/goflash"
$G bench --seqlens 2048,8192 --headdims 256 --causal both --direction bwd --softcap 30 --reps 5 --warmup 2 --compare-torch --out "$OUT/bench-softcap" > "$OUT/bench-softcap.txt" 2>&1
$G bench --seqlens 2048,8192 --headdims 256 --causal both --direction bwd --softcap 30 --reps 5 --warmup 2 --deterministic --out "$OUT/bench-softcap-det" > "$OUT/bench-softcap-det.txt" 2>&1
$G bench --seqlens 8192 --headdims 256 --causal true --direction bwd --window 4096,0 --softcap 30 --reps 5 --warmup 2 --out "$OUT/bench-gemma2" > "$OUT/bench-gemma2.txt" 2>&1
$G bench --seqlens 8192 --headdims 256 --causal both --direction bwd --alibi --reps 5 --warmup 2 --out "$OUT/bench-alibi" > "$OUT/bench-alibi.txt" 2>&1
$G bench --varlen 512,8192,1000,3000,77,4096 --headdims 256 --causal both --direction bwd --reps 5 --warmup 2 --out "$OUT/bench-varlen" > "$OUT/bench-varlen.txt" 2>&1
$G bench --varlen 512,8192,1000,3000,77,4096 --headdims 256 --causal true --direction bwd --softcap 30 --reps 5 --warmup 2 --out "$OUT/bench-varlen-softcap" > "$OUT/bench-varlen-softcap.txt" 2>&1
echo "bench done ${SECONDS}s"
(cd flashattn && for tool in memcheck racecheck; do timeout 70 compute-sanitizer --tool $tool --kernel-name kns=d256 $B/flashattn.test -test.run 'TestGPUModifiedBackwardKernels|TestGPUConformanceBackward/default/(alibi-softcap10-N130-D256|window-l100-causal-softcap30-Nq200-Nk333-gqa2-D256|varlen-.*d256.*)|TestGPUVarlenErrors' -test.count=1 > "$OUT/san-$tool.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/san-$tool.txt"; tail -3 "$OUT/san-$tool.txt"; done)
left=$((585 - SECONDS)); [ $left -gt 30 ] && { timeout $left python3 .build/s17/flex.py > "$OUT/flex.txt" 2>&1; echo "rc=$? ${SECONDS}s" >> "$OUT/flex.txt"; tail -8 "$OUT/flex.txt"; }
