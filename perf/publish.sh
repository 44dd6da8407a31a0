#!/usr/bin/env bash
# The body of every perf/*/run.sh: GoFlash beside PyTorch SDPA on one GPU, each
# part one `goflash bench` (or check) run whose files land in OUTDIR/PART.
#
#   perf/publish.sh OUTDIR PEAK_TBPS PART...   PART: env check fp16 bf16 decode ladder ladder75
#
# ladder and ladder75 time the kernel ladder (on the device's kernels, and on
# the sm_75 kernels forced through their PTX); RUNG_SOURCE=R=FILE adds rung R
# compiled with NVRTC from FILE.
#
# Runs $GOFLASH (a binary built elsewhere from a clean commit), else builds
# goflash once from this checkout, which must be a clean commit: the parts
# rewrite the folder's tracked files, so the commit is taken before the first.
# goflash bench refuses to write under perf/ from a modified tree.
set -euo pipefail
out=$1 peak=$2
shift 2
cd "$(dirname "$0")/.."
if [ -n "${GOFLASH:-}" ]; then
	goflash=$GOFLASH
else
	if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
		echo "publish.sh: the checkout has changes; a published run needs a clean commit" >&2
		exit 2
	fi
	bin=$(mktemp -d)
	trap 'rm -rf "$bin"' EXIT
	go build -ldflags "-X main.commit=$(git rev-parse HEAD)" -o "$bin/goflash" ./cmd/goflash
	goflash=$bin/goflash
fi
mkdir -p "$out"
for p in "$@"; do
	case $p in
	env)
		{
			nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
			python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
		} >"$out/env.txt"
		;;
	check) "$goflash" check >"$out/check.txt" ;;
	fp16) "$goflash" bench --compare-torch --direction both --no-report --out "$out/fp16" ;;
	bf16) "$goflash" bench --compare-torch --direction both --dtype bf16 --no-report --out "$out/bf16" ;;
	decode) "$goflash" bench --decode --compare-torch --peak-tbps "$peak" --no-report --out "$out/decode" ;;
	ladder) "$goflash" bench --ladder ${RUNG_SOURCE:+--rung-source "$RUNG_SOURCE"} --no-report --out "$out/ladder" ;;
	ladder75) "$goflash" bench --ladder --force-arch 75 ${RUNG_SOURCE:+--rung-source "$RUNG_SOURCE"} --no-report --out "$out/ladder-sm75" ;;
	*)
		echo "publish.sh: unknown part $p" >&2
		exit 2
		;;
	esac
done
