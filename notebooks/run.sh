#!/usr/bin/env bash
# Execute the GoFlash notebooks headless with the GoNB kernel, then check what
# they printed (notebooks/check.py). Installs nothing: it needs `jupyter
# nbconvert` (Debian: jupyter-nbconvert), and gonb and goimports on PATH with
# GoNB's kernelspec installed (colab/install.sh, or the lines in
# notebooks/README.md).
#
#   notebooks/run.sh                 # all notebooks, executed copies in .build/notebooks
#   notebooks/run.sh 03 04           # only those whose names start with 03 or 04
#   GOFLASH_NB_OUT=/tmp/nb notebooks/run.sh
#   GOFLASH_NB_HTML=1 notebooks/run.sh   # also write an HTML page of each executed notebook
#   GOFLASH_NB_BROWSER=0 notebooks/run.sh   # do not load the charts in headless Chromium
#   GOFLASH_NB_FAKE_SDPA=t4 notebooks/run.sh 07   # PyTorch's part answered by bench/benchtest, as on a T4 (CI)
#   GOFLASH_NB_SOLVED=1 notebooks/run.sh  # every exercise answered by its solution cell (copies in .build/notebooks/solved)
#
# By default the notebooks run as committed, their exercises blank: check.py
# then expects each exercise's hint and no "correct". With GOFLASH_NB_SOLVED=1
# each notebook is first copied with its exercise cells replaced by their
# solutions' code (check.py --solve), and check.py expects every exercise to
# print "correct". CI runs both.
#
# A headless run opts into the CPU path of the notebooks that ask for a GPU
# (GOFLASH_CPU_OK=1, see bench.Gate) unless GOFLASH_CPU_OK is set otherwise.
#
# Exit status: 0 when every notebook ran and passed its checks. Each
# notebook must finish within GOFLASH_NB_LIMIT seconds (default 120: the
# notebooks promise to run in under two minutes on a CPU-only machine).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${GOFLASH_NB_OUT:-$root/.build/notebooks}
limit=${GOFLASH_NB_LIMIT:-120}
jupyter=${JUPYTER:-jupyter}
python=${PYTHON:-/usr/bin/python3} # Debian's: it has nbformat (a pyenv python3 may not)
solved=${GOFLASH_NB_SOLVED:-0}
if [ "$solved" = 1 ]; then
	out=$out/solved
fi
mkdir -p "$out"
export GOFLASH_CPU_OK=${GOFLASH_CPU_OK:-1}
# setup.sh finds the checkout here when a notebook runs from a copy (solved).
export GOFLASH_DIR=$root
if [ -n "${GOFLASH_NB_FAKE_SDPA:-}" ]; then
	# No PyTorch here: notebook 07 runs bench/sdpa.py's stand-in instead
	# (fixed rates, labelled fake), and check.py expects its kind of answer.
	(cd "$root" && CGO_ENABLED=0 go build -o "$out/fakesdpa" ./bench/benchtest/fakesdpa) || exit 1
	export GOFLASH_PYTHON=$out/fakesdpa GOFLASH_FAKE_SDPA=$GOFLASH_NB_FAKE_SDPA
fi

nbs=()
for nb in "$here"/[0-9][0-9]_*.ipynb; do
	if [ $# -eq 0 ]; then
		nbs+=("$nb")
		continue
	fi
	for want in "$@"; do
		case "$(basename "$nb")" in "$want"*) nbs+=("$nb") ;; esac
	done
done
if [ ${#nbs[@]} -eq 0 ]; then
	echo "run.sh: no notebook matches: $*" >&2
	exit 2
fi

fail=0
names=()
t0=$(date +%s)
for nb in "${nbs[@]}"; do
	name=$(basename "$nb" .ipynb)
	names+=("$name")
	rm -f "$out/$name.ipynb"
	if [ "$solved" = 1 ]; then
		# The solved copy runs beside a copy of setup.sh, which its first cell runs.
		mkdir -p "$out/src"
		cp "$here/setup.sh" "$out/src/setup.sh"
		if ! "$python" "$here/check.py" --solve "$nb" "$out/src/$name.ipynb"; then
			printf '%-28s cannot fill in its solutions\n' "$name"
			fail=1
			continue
		fi
		nb=$out/src/$name.ipynb
	fi
	s=$(date +%s%N)
	# --allow-errors: the executed notebook is always written, and check.py
	# (not nbconvert) decides; a failing shell cell would not stop nbconvert anyway.
	# The outer timeout is a backstop for a hung kernel.
	timeout $((limit * 3)) "$jupyter" nbconvert --to notebook --execute --allow-errors \
		--ExecutePreprocessor.kernel_name=gonb --ExecutePreprocessor.timeout="$limit" \
		"$nb" --output-dir "$out" --output "$name" >"$out/$name.log" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - s) / 1000000))
	printf '%-28s %4d.%d s' "$name" $((ms / 1000)) $((ms % 1000 / 100))
	if [ $rc -ne 0 ]; then
		printf '  nbconvert failed (status %d), see %s\n' "$rc" "$out/$name.log"
		tail -n 20 "$out/$name.log" | sed 's/^/    /'
		fail=1
		continue
	fi
	if [ $ms -gt $((limit * 1000)) ]; then
		printf '  over the %d s limit\n' "$limit"
		fail=1
		continue
	fi
	echo
	if [ "${GOFLASH_NB_HTML:-0}" = 1 ]; then
		"$jupyter" nbconvert --to html "$out/$name.ipynb" --output-dir "$out" >/dev/null 2>&1 ||
			echo "    (HTML export of $name failed)"
	fi
done
mode=blank
if [ "$solved" = 1 ]; then mode=solved; fi
echo "notebooks executed ($mode exercises) in $(($(date +%s) - t0)) s; executed copies in $out"

# Charts are also loaded in a headless browser when Chromium is there
# (GOFLASH_NB_BROWSER=0 skips it, =PATH names the browser).
browser=()
b=${GOFLASH_NB_BROWSER:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$b" ] && [ "$b" != 0 ]; then
	browser=(--browser "$b")
fi
(cd "$out" && JUPYTER=$jupyter "$python" "$here/check.py" "${browser[@]}" "${names[@]/%/.ipynb}") || fail=1
exit $fail
