#!/usr/bin/env bash
# The setup every GoFlash notebook runs from its first code cell.
#
# Under the GoNB kernel (GONB_TMP_DIR is set) it points the kernel's scratch
# module at this checkout, so the cells import the repository's packages as
# they are on disk, wherever the repository was cloned. The -require matters:
# with -replace alone GoNB's automatic `go get` asks the proxy for the module.
#
# Under a Python kernel (a notebook opened from an "Open in Colab" link starts
# as Python) it installs Go, GoNB and goimports at the pinned versions, uses
# the checkout it belongs to or the one in /content/goflash or
# /kaggle/working/goflash (uploaded, or on a mounted Drive), else clones
# $GOFLASH_SRC (URL@ref, set at the top of the notebook's first cell), makes
# the next kernel start be GoNB, and restarts the kernel, which ends Run all
# on purpose. After the restart, run the notebook again from the top.
set -euo pipefail

GOFLASH_SRC=${GOFLASH_SRC:-https://github.com/goflash/goflash@main} # URL@ref
MOD=github.com/goflash/goflash
GONB_PIN=v0.11.5 # the notebooks are executed with this GoNB in CI

if [ -n "${GONB_TMP_DIR:-}" ]; then
	root=""
	for d in "${GONB_DIR:-.}" "${GOFLASH_DIR:-}" /content/goflash /kaggle/working/goflash; do
		if [ -z "$d" ] || [ ! -d "$d" ]; then continue; fi
		if [ "$(cd "$d" && go list -m 2>/dev/null)" = "$MOD" ]; then
			root=$(cd "$d" && go list -m -f '{{.Dir}}')
			break
		fi
	done
	if [ -z "$root" ]; then
		echo "setup: no checkout of $MOD found (looked in GONB_DIR, GOFLASH_DIR, /content, /kaggle/working)" >&2
		exit 1
	fi
	cd "$GONB_TMP_DIR"
	# gonbui (charts) must be the kernel's own version; pinning it also spares
	# GoNB's `go get` a version-list query, which some proxies refuse.
	go mod edit -replace "$MOD=$root" -require "$MOD@v0.0.0-00010101000000-000000000000" \
		-require "github.com/janpfeifer/gonb@${GONB_VERSION:-$GONB_PIN}"
	echo "packages of $MOD imported from $root"
	echo "$(go version | cut -d' ' -f3), GoNB ${GONB_VERSION:-unknown} (notebooks checked with $GONB_PIN)"
	if [ "${GONB_VERSION:-}" != "$GONB_PIN" ]; then
		echo "note: this GoNB is not $GONB_PIN; the notebooks may still work" >&2
	fi
	exit 0
fi

# Not under GoNB: a hosted Python runtime.
if [ -d /kaggle/working ]; then
	base=/kaggle/working
elif [ -d /content ]; then
	base=/content
else
	echo "setup: this is not a GoNB kernel. Install GoNB (see notebooks/README.md) and" >&2
	echo "       open the notebook with the 'Go (gonb)' kernel." >&2
	exit 1
fi
here=$(cd "$(dirname "$0")/.." && pwd)
repo="$base/goflash"
if [ -f "$here/go.mod" ] && [ -f "$here/colab/install.sh" ]; then
	repo=$here
	echo "setup: using the checkout at $repo (not cloning $GOFLASH_SRC)"
elif [ -f "$repo/go.mod" ]; then
	echo "setup: using the checkout already at $repo (uploaded or mounted; not cloning $GOFLASH_SRC)"
else
	url=${GOFLASH_SRC%@*} ref=${GOFLASH_SRC##*@}
	if ! log=$(git clone --quiet --depth 1 --branch "$ref" "$url" "$repo" 2>&1); then
		hint=""
		if [ "$base" = /kaggle/working ]; then hint=" On Kaggle: Settings → Internet → on (needs a phone-verified account)."; fi
		echo "setup: cannot clone $url at $ref ($(echo "$log" | tail -n 1)): set GOFLASH_SRC=URL@ref at the top of the first cell, or upload a checkout to $repo.$hint" >&2
		exit 1
	fi
	echo "setup: cloned $url at $ref into $repo"
fi
bash "$repo/colab/install.sh"

# The hosted runtime restarts its kernel with `python3 -m colab_kernel_launcher`
# (Colab) or `python3 -m ipykernel_launcher` (Kaggle, Jupyter): make whichever
# of these exists start GoNB instead, with the checkout's location in its
# environment. This changes this runtime only (it is thrown away at its end).
# find_spec locates a module without running it.
fallback="choose the Go kernel by hand: Runtime → Change runtime type → Go (gonb) (GoNB is installed), then run the notebook from the top"
replaced=0
for m in colab_kernel_launcher ipykernel_launcher; do
	f=$(python3 -c "import importlib.util as u, sys; s = u.find_spec(sys.argv[1]); print(s.origin if s and s.origin else '')" "$m" 2>/dev/null) || continue
	if [ -z "$f" ] || [ ! -w "$f" ]; then continue; fi
	cat >"$f" <<EOF
# Replaced by GoFlash's notebooks/setup.sh: this runtime's kernel is GoNB.
import os, sys
os.environ["GOFLASH_DIR"] = "$repo"
os.environ["PATH"] = "/usr/local/go/bin:/usr/local/bin:" + os.environ.get("PATH", "")
conn = [a for a in sys.argv[1:] if a.endswith(".json")][-1]
os.execv("/usr/local/bin/gonb", ["gonb", "--kernel", conn])
EOF
	replaced=1
done
if [ "$replaced" = 0 ]; then
	echo "setup: found no kernel launcher to replace; $fallback" >&2
	exit 1
fi
echo
echo "Go and GoNB are installed and the next kernel start will be GoNB."
echo "The kernel now restarts, which stops Run all here on purpose (the cells below are Go)."
echo "When the runtime is back (a few seconds), run the notebook again from the top."
echo "If it does not come back as Go, $fallback."
# Kill the Python kernel that runs this cell; the host starts a new one.
p=$$
while [ "$p" -gt 1 ]; do
	if tr '\0' ' ' <"/proc/$p/cmdline" | grep -Eq 'kernel_launcher|ipykernel'; then
		kill -9 "$p"
		exit 0
	fi
	p=$(awk '/^PPid:/{print $2}' "/proc/$p/status")
done
echo "Could not find the kernel process: use Runtime → Restart session, or $fallback." >&2
