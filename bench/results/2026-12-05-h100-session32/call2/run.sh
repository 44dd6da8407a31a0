#!/usr/bin/env bash
# Session 32, call 2 (kind nvidia-h100-x1; carry .build/s32: g.tar.xz = goflash built with CGO_ENABLED=0
# from main, fa2.fatbin reduced to its sm_90 image, fa2_sm75.fatbin emptied: the forced Turing path is
# not run). The first H100 figures: goflash check; the FA2 paper sweep beside PyTorch SDPA (forward with
# the sm_80 kernels, then forward+backward); decode beside SDPA; the modifiers' cost at N 8192.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}; B=/tmp/c2; R=/tmp/c2/res
mkdir -p "$OUT" $B $R; xz -dc .build/s32/g.tar.xz | tar -xf - -C $B
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'; } | tee "$OUT/gpu.txt"
t0=$SECONDS
step() {  # name timeout args...: goflash ARGS, log in $R/NAME.txt
  local n=$1 t=$2; shift 2
  timeout "$t" $B/goflash "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? $((SECONDS-t0))s"
}
step check 60 check; tail -1 $R/check.txt
step paper 200 bench --compare-torch --with-sm80 --out $R/paper
step both 200 bench --compare-torch --direction both --out $R/both
step decode128 90 bench --decode --compare-torch --peak-tbps 3.35 --out $R/decode128
step decode64 60 bench --decode --compare-torch --peak-tbps 3.35 --headdims 64 --seqlens 4096,32768,131072 --out $R/decode64
step decodemqa 60 bench --decode --compare-torch --peak-tbps 3.35 --heads 8 --kv-heads 1 --seqlens 4096,32768,131072 --out $R/decodemqa
for m in "--softcap 30" "--alibi" "--softcap 30 --alibi" "--window 2048,-1"; do
  # shellcheck disable=SC2086
  step "mod${m// /}" 40 bench --seqlens 8192 --headdims 64,128 --causal both --reps 20 --warmup 5 $m --out "$R/mod${m// /}"
done
cd $R && tar -cJf "$OUT/res.tar.xz" . && echo "all done $((SECONDS-t0))s"
