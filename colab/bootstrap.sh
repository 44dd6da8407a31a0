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
#
# Environment:
#   GOFLASH_DEVICES="0 1"   bench these GPUs one after the other (Kaggle's
#                           GPU T4 x2; "all": every GPU); default 0. GPU N > 0
#                           writes bench-gpuN/.
#   GOFLASH_CPU_OK=1        go on without a GPU (the CPU paths); otherwise a
#                           machine without one stops here, saying how to
#                           attach one.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${GOFLASH_RESULTS:-$PWD/goflash-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr -d ' ')
if [ -z "$gpus" ] && [ "${GOFLASH_CPU_OK:-}" != 1 ]; then
	echo "No NVIDIA GPU in this runtime. Colab: Runtime → Change runtime type → T4 GPU; Kaggle: Settings →"
	echo "Accelerator → GPU T4 x2. Then run again. (GOFLASH_CPU_OK=1 runs everything on the CPU instead.)"
	exit 2
fi
devices=${GOFLASH_DEVICES:-0}
if [ "$devices" = all ]; then
	devices=${gpus:-0}
fi
for d in $devices; do
	case "$d" in '' | *[!0-9]*)
		echo "GOFLASH_DEVICES: $d is not a GPU index (want e.g. \"0 1\" or all)" >&2
		exit 2
		;;
	esac
done

if ! bash "$repo/colab/install.sh"; then
	echo "bootstrap: installing Go and GoNB failed (above); nothing was run" | tee "$out/summary.txt" >&2
	exit 1
fi
export PATH=/usr/local/go/bin:$PATH
gopath=$(go env GOPATH)
export PATH=$gopath/bin:$PATH
cd "$repo" || exit 1

status=0
step() { printf '\n== %s ==\n' "$*"; }
record() { # record NAME: run the rest of the line, keep its output in $out/NAME.txt
	local name=$1 t0=$SECONDS
	shift
	"$@" 2>&1 | tee "$out/$name.txt"
	local rc=${PIPESTATUS[0]}
	echo "$name: exit status $rc, $((SECONDS - t0)) s" >>"$out/summary.txt"
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


# One build, so every step reports the same commit.
go build -o "$out/.goflash" -ldflags "-X main.commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)" ./cmd/goflash || exit 1
step "goflash check"
record check "$out/.goflash" check

for d in $devices; do
	name=bench
	[ "$d" = 0 ] || name=bench-gpu$d
	step "goflash bench --compare-torch --device $d"
	record "$name" "$out/.goflash" bench --compare-torch --device "$d" --out "$out/$name"
done

step "notebooks"
# The checker needs nbformat: the hosted runtimes' python3 has it; elsewhere the
# first python3 on PATH may not be the one with Jupyter (Debian's /usr/bin/python3 is).
py=$(command -v python3)
for p in "$py" /usr/bin/python3; do
	if "$p" -c 'import nbformat' 2>/dev/null; then py=$p && break; fi
done
record notebooks env PYTHON="$py" GOFLASH_NB_OUT="$out/notebooks" GOFLASH_NB_HTML=1 \
	GOFLASH_NB_BROWSER=0 GOFLASH_NB_LIMIT="${GOFLASH_NB_LIMIT:-300}" notebooks/run.sh

rm -f "$out/.goflash"
step "summary"
cat "$out/summary.txt"
echo "results in $out"
exit $status
