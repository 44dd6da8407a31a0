#!/usr/bin/env bash
# Device run (branch mask2b): the modified forward kernels after the
# per-combination split (fa2_fwd_*_mod[_cap][_alibi]): GPU conformance on the
# default, forced sm_75 and bf16 paths, compute-sanitizer on the _mod kernels,
# tanh.approx's error, and the cost beside the plain forward at N 2048-8192.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=.build/mask2b
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; } | tee "$OUT/gpu.txt"
(cd $B && tar -xJf bins.tar.xz) || exit 9
t=$SECONDS; (cd flashattn && timeout 100 "../$B/flashattn.test" -test.run 'TestGPUConformance$|TestGPUConformanceSM75|TestGPUConformanceBF16$|TestGPURefusesScoreMods|KernelTable' -test.v -test.count=1 -test.timeout 95s) > "$OUT/tests.txt" 2>&1
echo "tests rc=$? $((SECONDS-t))s"; grep -E "^(--- |FAIL|ok|PASS|panic)|^    --- FAIL" "$OUT/tests.txt" | head -20
t=$SECONDS; run_san() { (cd flashattn && timeout 40 compute-sanitizer --tool "$1" --error-exitcode 9 "../$B/flashattn.test" -test.run "$2" -test.count=1); echo "rc=$?"; }
mods='(window-l16|window-l5|alibi-window|alibi-softcap10|window-l100|softcap5|all-window)'
{ echo "== memcheck default: $mods"; run_san memcheck "TestGPUConformance\$/$mods"
  echo "== memcheck forced sm_75"; run_san memcheck "TestGPUConformanceSM75/$mods"
  echo "== racecheck default"; run_san racecheck "TestGPUConformance\$/$mods"; } > "$OUT/sanitizers.txt" 2>&1
echo "sanitizers $((SECONDS-t))s"; grep -E "^==|ERROR SUMMARY|^rc=|RACECHECK SUMMARY" "$OUT/sanitizers.txt"
$B/tanh_probe > "$OUT/tanh-probe.txt" 2>&1; cat "$OUT/tanh-probe.txt"
t=$SECONDS; mkdir -p /tmp/bench
for m in "window 8191,-1" "softcap 30" "alibi" "softcap 30 --alibi --window 4096,-1"; do
  name=$(echo "$m" | tr -cd 'a-z0-9'); read -ra flags <<<"--$m"
  { echo "== --$m"
    timeout 60 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction fwd --no-report --reps 10 --warmup 3 "${flags[@]}" --out "/tmp/bench/$name" 2>&1
    echo "rc=$?"; } >> "$OUT/bench.txt"
done; echo "bench $((SECONDS-t))s"; (cd /tmp && tar -czf "$OUT/bench.tar.gz" bench); grep -E "^==|^ +fwd|^rc" "$OUT/bench.txt"
