#!/usr/bin/env bash
# Session 22, call 3 (carry .build/c3/b.tar.xz: flashattn.test and goflash of this commit's tree, their
# fa2.fatbin cut to the sm_90 image; fa2_sm75.fatbin whole):
# 1. compute-sanitizer racecheck of the forward-only D256 run on the forced Turing path, on cases that
#    run each of the eight fa2_fwd_sm75_d256* kernels (call 2's racecheck of the whole run was cut at 150 s);
# 2. the Turing D256 forward timed on the H200 from its PTX (`--with-sm75`: H200 timings of the Turing
#    kernels, not T4 ones) beside the H200's own path at D128 (Hopper kernel) and D256 (sm_80 kernel) and
#    PyTorch SDPA on the same shapes (FA2 paper shapes: B = 16k/N, H = 2048/D), fp16, causal and not.
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c3
mkdir -p "$OUT" $B; xz -dc .build/c3/b.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
R='^(N97-causal-gqa8-D256|Nq1-Nk1025-mqa|alibi-softcap10-N130-D256|window-l100-causal-softcap30-Nq200-Nk333-gqa2-D256|window-l16-r8-N97-at-D256|alibi-N97-gqa4-at-D256|softcap5-scale1-Nq97-Nk70-at-D256|varlen-gqa2-at-D256|varlen-causal-gqa2-at-D256|varlen-window-l2-r3-at-D256|varlen-all-mods-causal-at-D256)$'
(cd flashattn && timeout 200 compute-sanitizer --tool racecheck $B/flashattn.test -test.run "TestGPUConformanceSM75/fwd-only/$R" -test.v -test.count=1 > "$OUT/san_racecheck.txt" 2>&1)
echo "racecheck rc=$? $((SECONDS-t0))s"; grep -E "RACECHECK SUMMARY|^(ok|PASS|FAIL)" "$OUT/san_racecheck.txt" | head -3
echo "subtests PASS $(grep -cE -- '--- PASS: TestGPUConformanceSM75/fwd-only/' "$OUT/san_racecheck.txt") FAIL $(grep -cE -- '--- FAIL' "$OUT/san_racecheck.txt")"
timeout 300 $B/goflash bench --backend gpu --headdims 128,256 --seqlens 1024,4096,16384 --with-sm75 --compare-torch \
  --no-report --out "$B/bench" > "$OUT/bench.txt" 2>&1
echo "bench rc=$? $((SECONDS-t0))s"; cp "$B"/bench/bench.md "$OUT/" 2>/dev/null; grep -iE "d=256|D 256|256" "$OUT/bench.txt" | head -30
