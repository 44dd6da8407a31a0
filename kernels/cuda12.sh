#!/usr/bin/env bash
# cuda12.sh: print the path of a private nvcc 12.4 for the sm_90a kernels (wgmma
# and TMA need PTX ISA 8.0, i.e. CUDA 12; everything else stays on the system's
# nvcc 11.8 so that old Colab/Kaggle drivers keep loading it).
# On first use it fetches Debian trixie non-free's CUDA 12.4 packages into a cache
# outside the repo without touching the system: a private apt config and lists,
# `apt-get download` of the pinned versions below, the sha256 of each .deb
# checked, `dpkg-deb -x` into the cache. Later calls reuse the cache.
# Usage: nvcc12=$(kernels/cuda12.sh)
# Cache: $GOFLASH_CUDA12 (default ${XDG_CACHE_HOME:-~/.cache}/goflash-cuda12),
# about 1 GB downloaded once (about 2 min 40 s), 240 MB kept: of nvidia-cuda-dev
# only its headers and the static CUDA runtime (a -cubin build needs the
# headers; the kernels/dev harnesses link libcudart_static.a).
set -euo pipefail
cache=${GOFLASH_CUDA12:-${XDG_CACHE_HOME:-$HOME/.cache}/goflash-cuda12}
root=$cache/root
bin=$root/usr/lib/nvidia-cuda-toolkit/bin

# package version sha256, as trixie's signed non-free Packages index lists them.
# When trixie moves on to a newer upload, apt refuses these versions: update the
# three lines (and rebuild: the sm_90a cubin may change).
pins="libnvvm4 12.4.131~12.4.1-2 3c905c1df7453e1ad477516c4465629c310d2f58a796d66f44070dc289e7ec12
nvidia-cuda-toolkit 12.4.131~12.4.1-2 cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319
nvidia-cuda-dev 12.4.127~12.4.1-2 d846838f914a0176948d48a8bcade5d6dbcccb5c9374343f6475f5503f173ee0"

# The stamp holds the pins and what was kept of them; written last, so a fetch
# cut short (or a cache made by an older version of this script) is redone.
dev_keep="./usr/include ./usr/lib/x86_64-linux-gnu/libcudart_static.a"
stamp="$pins
nvidia-cuda-dev kept: $dev_keep
profile: with LIBRARIES"
if [ -x "$bin/nvcc" ] && [ "$(cat "$cache/pins" 2>/dev/null)" = "$stamp" ]; then
  echo "$bin/nvcc"
  exit 0
fi

echo "cuda12.sh: fetching CUDA 12.4 (Debian trixie non-free, about 1 GB) into $cache" >&2
mkdir -p "$cache"
work=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie non-free" >"$work/sources.list"
apt=(apt-get -q -o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=/dev/null
     -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
"${apt[@]}" update >&2
while read -r pkg ver sum; do
  (cd "$work/debs" && "${apt[@]}" download "$pkg=$ver" >&2)
  deb=$(ls "$work/debs/${pkg}_"*.deb)
  got=$(sha256sum "$deb" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "cuda12.sh: $(basename "$deb"): sha256 $got, pinned $sum: refusing it" >&2
    exit 1
  fi
  if [ "$pkg" = nvidia-cuda-dev ]; then
    # shellcheck disable=SC2086  # dev_keep is a list of paths
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work/root" $dev_keep
  else
    dpkg-deb -x "$deb" "$work/root"
  fi
  rm "$deb"
done <<<"$pins"

# The packaged bin/nvcc.profile is a symlink to /etc/nvcc.profile, whose
# absolute paths name the system's CUDA 11.8. This one is relative to the
# nvcc binary ($(_HERE_) = usr/lib/nvidia-cuda-toolkit/bin): libdevice beside
# bin, ptxas/fatbinary/cudafe++ in usr/bin, the 12.4 headers in usr/include
# ahead of the system's 11.8 ones, the static runtime in usr/lib/x86_64-linux-gnu
# ahead of the system's. bin/ also holds Debian's gcc/g++ wrappers,
# which pick a host compiler nvcc 12.4 accepts.
tk=$work/root/usr/lib/nvidia-cuda-toolkit
for p in "$tk/libdevice/libdevice.10.bc" "$tk/bin/cicc" "$work/root/usr/bin/ptxas" "$work/root/usr/bin/fatbinary" \
         "$work/root/usr/bin/cudafe++" "$work/root/usr/include/cuda_runtime.h"; do
  [ -e "$p" ] || { echo "cuda12.sh: ${p#"$work/root/"} missing from the extracted packages" >&2; exit 1; }
done
rm -f "$tk/bin/nvcc.profile"
cat >"$tk/bin/nvcc.profile" <<'PROFILE'
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH		+= $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES	+= "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES	=+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu"
PROFILE
"$tk/bin/nvcc" --version | grep -q "release 12.4" || { echo "cuda12.sh: the extracted nvcc is not 12.4" >&2; exit 1; }

rm -rf "$root"
mv "$work/root" "$root"
printf '%s' "$stamp" >"$cache/pins"
echo "$bin/nvcc"
