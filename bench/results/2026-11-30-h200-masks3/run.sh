#!/usr/bin/env bash
# Device run (branch mask3): ALiBi's column-bias form on blocks off the diagonal.
# GPU conformance (default, forced sm_75, bf16), compute-sanitizer on the ALiBi
# cases, the cost beside the plain forward (--alibi, --softcap 30), and ncu's
# pipe utilisation of the D64 softcap kernel beside the plain one.
# PARTS: any of tests san bench ncu (default all). From the repo root, carry .build/mask3.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=$PWD/.build/mask3; P=${PARTS:-tests san bench ncu}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
(cd "$B" && tar -xJf bins.tar.xz) || exit 9
has() { [[ " $P " == *" $1 "* ]]; }
cd flashattn || exit 9
if has tests; then t=$SECONDS
  timeout 120 "$B"/flashattn.test -test.run 'TestGPUConformance$|TestGPUConformanceSM75|TestGPUConformanceBF16$|TestGPURefusesScoreMods|KernelTable' -test.v -test.count=1 > "$OUT/tests.txt" 2>&1
  echo "tests rc=$? $((SECONDS-t))s"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL" "$OUT/tests.txt" | head -20
  grep -E "alibi" "$OUT/tests.txt" | grep -E -- "--- (PASS|FAIL)" | head -30
fi
if has san; then t=$SECONDS; c='alibi'
  san() { timeout 60 compute-sanitizer --tool "$1" --error-exitcode 9 "$B"/flashattn.test -test.run "$2" -test.count=1 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(ok|FAIL|PASS)" ; echo "rc=${PIPESTATUS[0]} ($1 $2)"; }
  { san memcheck "TestGPUConformance\$/$c"; san memcheck "TestGPUConformanceSM75/$c"; san memcheck "TestGPUConformanceBF16\$/$c"
    san racecheck "TestGPUConformance\$/$c"; } > "$OUT/sanitizers.txt" 2>&1
  echo "sanitizers $((SECONDS-t))s"; cat "$OUT/sanitizers.txt"
fi
cd .. || exit 9
if has bench; then t=$SECONDS; mkdir -p /tmp/bench
  for m in alibi "softcap 30"; do
    name=$(echo "$m" | tr -cd 'a-z0-9'); read -ra flags <<<"--$m"
    { echo "== --$m"; timeout 60 "$B"/goflash bench --seqlens "${SEQ:-2048,4096,8192}" --headdims 64,128 --direction fwd --no-report --reps 10 --warmup 3 "${flags[@]}" --out "/tmp/bench/$name" 2>&1; echo "rc=$?"; } >> "$OUT/bench.txt"
  done; echo "bench $((SECONDS-t))s"; grep -E "^==|^ +fwd|^rc" "$OUT/bench.txt"; cp -r /tmp/bench "$OUT/"
fi
if has ncu; then t=$SECONDS
  k='regex:^fa2_fwd_sm80_d64(_mod_cap)?$'
  m=sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,gpu__time_duration.sum
  timeout 60 ncu --kernel-name "$k" --launch-count 2 --metrics "$m" --section WarpStateStats \
    "$B"/goflash bench --seqlens 8192 --headdims 64 --direction fwd --no-report --reps 1 --warmup 0 --softcap 30 --out /tmp/ncub > "$OUT/ncu.txt" 2>&1
  echo "ncu rc=$? $((SECONDS-t))s"; grep -vE "^==PROF==|^\s*$" "$OUT/ncu.txt" | tail -60
fi
(cd "$OUT" && tar -czf /tmp/mask3-out.tgz . && find . -mindepth 1 -delete && mv /tmp/mask3-out.tgz ./out.tgz)
