#!/usr/bin/env bash
# check.sh (CI): each kernel family's translation unit includes no other family's
# sources (families.sh: a change to one family leaves the others' images
# byte-identical), the committed kernel artifacts are exactly what the sources build to, no kernel
# spills, every Turing variant fits 64 KiB of shared memory and every sm_80 one
# 99 KiB (a _large row 227 KiB: it runs only where it fits; an sm90a one,
# H100/H200 only, 227 KiB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
committed=$here/../internal/kernels
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$here/families.sh" || fail=1
"$here/build.sh" "$tmp/out"
built=$(cd "$tmp/out" && ls fa2_*.fatbin fa2_*.cubin | tr '\n' ' ')
held=$(cd "$committed" && ls fa2_*.fatbin fa2_*.cubin | tr '\n' ' ')
if [ "$built" != "$held" ]; then
  echo "check.sh: internal/kernels holds the images $held; the build writes $built" >&2
  fail=1
fi
for f in $built resources.md table_gen.go; do
  if ! cmp -s "$tmp/out/$f" "$committed/$f"; then
    echo "check.sh: internal/kernels/$f differs from a rebuild of kernels/ (run go generate ./internal/kernels and commit)" >&2
    fail=1
  fi
done
# Resources rows: | symbol | sm | registers | stack | spill stores | spill loads | static smem | image |.
# Tile rows:      | symbol | arch | D | causal | Br | Bc | warps | stages | splits/chunk | in regs | dynamic smem |.
awk -F' *\\| *' '
  /^## / { res = /^## Resources/ }
  res && NF == 10 && $2 ~ /^fa2_/ && !($2 ~ /_sm80_/ && $3 < 80) && ($5 + $6 + $7 > 0) {
    printf "check.sh: %s sm_%s spills (stack %s, stores %s, loads %s bytes)\n", $2, $3, $5, $6, $7; bad = 1 }
  res && NF == 10 && $2 ~ /^fa2_[a-z_]*sm(75|80|90a)_/ && !($2 ~ /_sm80_/ && $3 < 80) { static[$2] = ($8 > static[$2] ? $8 : static[$2]) }
  !res && NF == 13 && $2 ~ /^fa2_[a-z_]*sm(75|80|90a)_/ { dyn[$2] = $12 }
  END {
    # sm_80 path: 99 KiB (sm_86/89); a _large row up to 227 KiB (H100/H200): Go
    # runs it only where it fits, else its <= 99 KiB sibling if it has one
    # (internal/kernels TestLargeRows; the D256 single pass and the ordered
    # deterministic twins have none: elsewhere the three kernels run, or none).
    for (s in dyn) {
      need = dyn[s] + static[s]
      lim = s ~ /_sm75_/ ? 65536 : s ~ /_large/ || s ~ /_sm90a_/ ? 232448 : 101376
      if (need > lim) { printf "check.sh: %s needs %d bytes of shared memory, its path allows %d\n", s, need, lim; bad = 1 }
    }
    exit bad
  }' "$committed/resources.md" >&2 || fail=1
[ "$fail" = 0 ] && echo "check.sh: kernels OK (families independent, artifacts reproducible, no spills, smem: sm_75 <= 64 KiB, sm_80 <= 99 KiB, _large and sm90a rows <= 227 KiB)"
exit "$fail"
