#!/usr/bin/env bash
# The body of every perf/*/run.sh: GoFlash beside PyTorch SDPA on one GPU, each
# part one `goflash bench` (or check) run whose files land in OUTDIR/PART.
#
#   perf/publish.sh OUTDIR PEAK_TBPS PART...   PART: env check fp16 bf16 decode
#
# Runs `goflash` from the repository (go run) or $GOFLASH (a built binary).
# goflash bench refuses to write under perf/ from a modified tree, so a
# published run names the clean commit it measured.
set -euo pipefail
out=$1 peak=$2
shift 2
cd "$(dirname "$0")/.."
read -r -a goflash <<<"${GOFLASH:-go run ./cmd/goflash}"
mkdir -p "$out"
for p in "$@"; do
	case $p in
	env)
		{
			nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
			python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
		} >"$out/env.txt"
		;;
	check) "${goflash[@]}" check >"$out/check.txt" ;;
	fp16) "${goflash[@]}" bench --compare-torch --direction both --no-report --out "$out/fp16" ;;
	bf16) "${goflash[@]}" bench --compare-torch --direction both --dtype bf16 --no-report --out "$out/bf16" ;;
	decode) "${goflash[@]}" bench --decode --compare-torch --peak-tbps "$peak" --no-report --out "$out/decode" ;;
	*)
		echo "publish.sh: unknown part $p" >&2
		exit 2
		;;
	esac
done
