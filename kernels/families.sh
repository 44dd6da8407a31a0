#!/usr/bin/env bash
# families.sh (check.sh's first step, seconds): each kernel family's translation
# unit includes no source another family owns. build.sh builds each image from
# its family's translation unit alone, deterministically, so then a change to
# one family's sources leaves every other family's images byte-identical. The
# headers no family owns (mma.cuh, traits.cuh, varlen.cuh, ...) are shared: a
# change to one of them may change several images.
set -euo pipefail
cd "$(dirname "$0")"
# family: its translation unit, then the other sources it owns.
owned="fwd: fwd.cu fwd.cuh
bwd: bwd.cu bwd.cuh bwd_kv.cuh
decode: decode.cu decode.cuh
ladder: ladder.cu $(echo ladder/*.cuh)
sm90a: fa2_sm90a.cu fwd_sm90.cuh wgmma.cuh tma.cuh"
fail=0
while read -r fam tu _; do
  # nvcc -M: the files the translation unit includes, as paths relative to kernels/.
  deps=$(nvcc -M -std=c++17 -x cu "$tu" | tr -d '\\' | tr ' ' '\n' | grep -E '^[^/].*\.cuh?$' |
    sed -E ':a; s#[^/]+/\.\./##; ta' | sort -u)
  echo "families.sh: ${fam%:} ($tu) includes: $(echo "$deps" | grep -vx "$tu" | tr '\n' ' ')"
  while read -r other files; do
    [ "$other" = "$fam" ] && continue
    for f in $files; do
      if grep -qxF "$f" <<<"$deps"; then
        echo "families.sh: the ${fam%:} family's $tu includes $f, a source of the ${other%:} family" >&2
        fail=1
      fi
    done
  done <<<"$owned"
done <<<"$owned"
exit "$fail"
