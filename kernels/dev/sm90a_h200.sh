#!/usr/bin/env bash
# One H200 call for the Hopper forward, run through the device tool from the
# repository root, carrying $B.tar.xz (B default .build/sm90a) built here:
#   $(kernels/cuda12.sh) -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DFA2_SM90A \
#     kernels/dev/fwd_check.cu -o $B/fwd_check90a -ldl
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o $B/flashattn.test ./flashattn
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o $B/goflash ./cmd/goflash
#   candidate cubins in $B (NAME=PATH,D:Br:Bc:stages[:n] in CANDS; fwd_check.cu says the syntax)
#   tar -C $B -cf - . | xz -T2 -9 --lzma2=dict=128MiB > $B.tar.xz
# The tree (~52 MB) and the carry share 64 MiB: the harness and cubins (check, san: ~2.6 MB)
# and the Go binaries (go, bench, mods: ~12 MB) may need a call each, with B set per call.
# Steps (STEPS, default all):
#   check  fwd_check90a sm90a: every Hopper kernel as compiled here (tpl), from the
#          committed cubin and from CANDS, checked against the CPU reference (5 CTAs
#          each, so every CTA walks several tiles), then timed shape-major beside the
#          fatbin's sm_80 kernels (ROUNDS rounds, best median; NS the lengths)
#   san    compute-sanitizer memcheck and racecheck on sm90a-check (tpl, cubin)
#   go     the Go GPU tests of GO_RUN (default: the Hopper, conformance and raw ones)
#   bench  goflash bench --compare-torch --with-sm80 (the FA2 paper sweep beside SDPA's
#          flash, cuDNN and efficient backends, one process) into $OUT/paper
#   ncu    ncu --set full on the first launch of NCU_KERNEL (a regex; default the D64
#          causal Hopper kernel) under goflash bench NCU_ARGS, into $OUT/ncu.{ncu-rep,txt}
#   mods   goflash bench at N 8192 with each score modifier (the modified forward's line
#          beside the plain one in each run: issue 14's 10% bar), into $OUT/mods.txt
# Logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-check san go bench mods}
B=${B:-.build/sm90a}
X=/tmp/sm90a; mkdir -p $X
if [ -f "$B.tar.xz" ]; then xz -dc "$B.tar.xz" | tar -xf - -C $X; else cp -r "$B"/. $X/; fi
{ date -u +"run %Y-%m-%dT%H:%M:%SZ"; git log -1 --format="commit %H" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
has() { [[ " $STEPS " == *" $1 "* ]]; }
# Candidate paths are relative to $B; the harness reads them from $X.
cands=(); for c in ${CANDS:-}; do cands+=("${c%%=*}=$X/${c#*=}"); done
if has check; then
  ROUNDS=${ROUNDS:-3} NS=${NS:-512,1024,2048,4096,8192,16384} timeout "${CHECK_TIMEOUT:-300}" \
    $X/fwd_check90a sm90a internal/kernels "${cands[@]}" >"$OUT/sm90a.log" 2>&1; echo "sm90a rc=$?"
  grep -E "^(check|all|CHECK)" "$OUT/sm90a.log"; grep FAIL "$OUT/sm90a.log" | head -20
  # one line per kernel and length: every source's TFLOP/s side by side
  grep "^bench" "$OUT/sm90a.log" | sed -E 's/^bench +([^ ]+) +([^ ]+) .*N=([0-9]+) .* ([0-9.]+) TFLOP.*/\2 \3 \1=\4/' |
    sort -k1,1 -k2,2n -s | awk '{k=$1" "$2; if (k!=pk) {if (pk) print l; l=k; pk=k} l=l" "$3} END {print l}' |
    tee "$OUT/sm90a_table.txt"
fi
if has san; then
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $X/fwd_check90a sm90a-check internal/kernels \
      >"$OUT/$tool.log" 2>&1; echo "$tool rc=$?"; tail -2 "$OUT/$tool.log"
  done
fi
if has go; then
  (cd flashattn && timeout "${GO_TIMEOUT:-450}" $X/flashattn.test -test.run "${GO_RUN:-Hopper|TestGPUConformance|TestGPURaw}" \
    -test.v -test.count=1 >"$OUT/gotest.log" 2>&1; echo "go test rc=$?")
  grep -cE "^--- PASS" "$OUT/gotest.log"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL" "$OUT/gotest.log" | head -30
fi
if has bench; then
  timeout "${BENCH_TIMEOUT:-240}" $X/goflash bench --compare-torch --with-sm80 --out "$OUT/paper" >"$OUT/bench.txt" 2>&1
  echo "bench rc=$?"; tail -45 "$OUT/bench.txt"
fi
if has mods; then
  for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1" "--window 1024,0"; do
    echo "== $m"
    # shellcheck disable=SC2086 # $m is several flags
    timeout 60 $X/goflash bench --seqlens 8192 --headdims 64,128 $m 2>&1 | grep -vi warn
  done >"$OUT/mods.txt"; echo "mods rc=$?"; cat "$OUT/mods.txt"
fi
if has ncu; then
  # shellcheck disable=SC2086 # NCU_ARGS is several flags
  timeout 200 ncu --set full -k "regex:${NCU_KERNEL:-fa2_fwd_sm90a_d64_causal}" -c 1 -f -o "$OUT/ncu" \
    $X/goflash bench ${NCU_ARGS:---seqlens 2048 --headdims 64 --causal true} >"$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
  ncu --import "$OUT/ncu.ncu-rep" --page details >"$OUT/ncu.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Stall|No Eligible|Warp Cycles Per Issued" "$OUT/ncu.txt" | head -30
fi
