#!/usr/bin/env bash
# One-click GoFlash run on a hosted GPU (Colab, Kaggle) or any Linux machine
# with an NVIDIA GPU: installs Go and GoNB (colab/install.sh), then runs, from
# the checkout this script belongs to,
#
#   go run ./cmd/goflash check                  GPUs, kernel variants, self-test
#   go run ./cmd/goflash bench --compare-torch  our kernel and PyTorch SDPA, same shapes, one run
#   notebooks/run.sh                            the seven notebooks, executed and checked
#
# and saves everything under $GOFLASH_RESULTS (default ./goflash-results):
# environment.txt, check.txt, bench/ (bench.json, .csv, .md, .html),
# notebooks/ (executed notebooks and their HTML pages), and a summary.
# Nothing here states a speed: the numbers are the ones measured on your GPU.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${GOFLASH_RESULTS:-$PWD/goflash-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)

bash "$repo/colab/install.sh" || exit 1
export PATH=/usr/local/go/bin:$(go env GOPATH)/bin:$PATH
cd "$repo"

status=0
step() { printf '\n== %s ==\n' "$*"; }
record() { # record NAME: run the rest of the line, keep its output in $out/NAME.txt
	local name=$1
	shift
	"$@" 2>&1 | tee "$out/$name.txt"
	local rc=${PIPESTATUS[0]}
	echo "$name: exit status $rc" >>"$out/summary.txt"
	[ "$rc" -eq 0 ] || status=1
}
: >"$out/summary.txt"

step "environment"
{
	date -u +"%Y-%m-%dT%H:%M:%SZ"
	echo "goflash commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
	go version
	nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: no GPU"
	python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU available:", torch.cuda.is_available())' 2>&1 ||
		echo "torch: not importable"
} | tee "$out/environment.txt"

step "goflash check"
record check go run ./cmd/goflash check

step "goflash bench --compare-torch"
record bench go run ./cmd/goflash bench --compare-torch --out "$out/bench"

step "notebooks"
# The checker needs nbformat: the hosted runtimes' python3 has it; elsewhere the
# first python3 on PATH may not be the one with Jupyter (Debian's /usr/bin/python3 is).
py=$(command -v python3)
for p in "$py" /usr/bin/python3; do
	if "$p" -c 'import nbformat' 2>/dev/null; then py=$p && break; fi
done
record notebooks env PYTHON="$py" GOFLASH_NB_OUT="$out/notebooks" GOFLASH_NB_HTML=1 \
	GOFLASH_NB_BROWSER=0 GOFLASH_NB_LIMIT="${GOFLASH_NB_LIMIT:-300}" notebooks/run.sh

step "summary"
cat "$out/summary.txt"
echo "results in $out"
exit $status
