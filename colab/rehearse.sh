#!/usr/bin/env bash
# Rehearse the free-T4 path on a newer NVIDIA GPU (an H200) that has Python
# with PyTorch but no Go, from the binaries colab/build-rehearsal.sh left in
# .build/rehearsal/. Run from the repository root:
#
#   OUT=/some/dir colab/rehearse.sh                 # every step
#   OUT=/some/dir colab/rehearse.sh bench nb07      # some: check bench gpu_tests nb06 nb07
#
# What runs, all logged:
#   goflash check
#   goflash bench --compare-torch --force-arch 75 --torch-emulate sm75
#       our Turing (sm_75) kernels, and PyTorch answering as on a T4: flash
#       unsupported, memory-efficient and math timed (on this GPU)
#   flashattn.test -test.run GPU      the GPU tests, forced-sm_75 conformance included
#   notebooks 06 and 07 as programs   07's PyTorch part emulating sm75 too
# and what comes back is at most 8 files directly in $OUT: summary.txt,
# bench.md, and rehearsal.tar.gz with everything (logs, bench.json/csv/md/html,
# the notebooks' chart pages, env.txt).
#
# These are H200 timings of a rehearsal, not T4 numbers.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bin=$root/.build/rehearsal
out=${OUT:?set OUT to the directory for the results}
if [ ! -x "$bin/goflash" ] && [ -f "$root/.build/rehearsal.tar.xz" ]; then
	tar -C "$root/.build" -xJf "$root/.build/rehearsal.tar.xz" # what build-rehearsal.sh packed
fi
if [ ! -x "$bin/goflash" ]; then
	echo "rehearse: no $bin/goflash: run colab/build-rehearsal.sh on a machine with Go first" >&2
	exit 2
fi
work=$(mktemp -d)
mkdir -p "$work/rehearsal" "$out"
w=$work/rehearsal
status=0
: >"$w/summary.txt"
steps=" ${*:-check bench gpu_tests nb06 nb07} "
record() { # record NAME CMD...: run CMD (if NAME is a step asked for), its output in NAME.log, its status in the summary
	local name=$1
	shift
	case "$steps" in *" $name "*) ;; *) return 0 ;; esac
	printf '\n== %s: %s ==\n' "$name" "$*"
	local t0=$SECONDS
	"$@" >"$w/$name.log" 2>&1
	local rc=$?
	tail -n 5 "$w/$name.log"
	echo "$name: exit status $rc, $((SECONDS - t0)) s: $*" >>"$w/summary.txt"
	[ "$rc" -eq 0 ] || status=1
}

{
	date -u +"%Y-%m-%dT%H:%M:%SZ"
	echo "goflash commit (built): $(cat "$bin/commit" 2>/dev/null || echo unknown)"
	nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
	python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU:", torch.cuda.is_available())' 2>&1
	uname -a
} >"$w/env.txt"
cat "$w/env.txt"

record check "$bin/goflash" check
arch=(--force-arch 75)
if ! nvidia-smi -L >/dev/null 2>&1; then
	arch=() # a dry run on a machine without a GPU: the CPU paths
	export GOFLASH_CPU_OK=1
	echo "no GPU: bench runs the CPU backends (a dry run of this script, not a rehearsal)" | tee -a "$w/summary.txt"
fi
record bench "$bin/goflash" bench --compare-torch "${arch[@]}" --torch-emulate sm75 --out "$w/bench"
record gpu_tests "$bin/flashattn.test" -test.run GPU -test.v
record nb06 env NBPROG_HTML="$w/nb06.html" "$bin/nb06_cuda_from_go"
record nb07 env NBPROG_HTML="$w/nb07.html" GOFLASH_TORCH_EMULATE=sm75 "$bin/nb07_benchmarks"

cp "$w/summary.txt" "$out/summary.txt"
[ -f "$w/bench/bench.md" ] && cp "$w/bench/bench.md" "$out/bench.md"
tar -C "$work" -czf "$out/rehearsal.tar.gz" rehearsal
rm -rf "$work"
echo
cat "$out/summary.txt"
ls -l "$out"
exit $status
