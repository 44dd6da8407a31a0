#!/usr/bin/env bash
# mk14.sh NAME "X(...) ...": a candidate cubin (./c_NAME.cubin) from a copy of the repository's
# kernels/ with FA2_SM90A_TILES replaced by the given rows (session 14, call 3: br128, s3, c64,
# c64s4; call 6: pc, built the same way from kernels/ with pc.patch applied, the shipped rows).
set -euo pipefail
K=$(cd "$(dirname "$0")/../../../../kernels" && pwd)
name=$1; tiles=$2; out=$PWD
d=/tmp/cand/$name; rm -rf "$d"; mkdir -p "$d"
cp "$K"/*.cuh "$K"/fa2_sm90a.cu "$d"/
python3 - "$d/traits.cuh" "$tiles" <<'PY'
import sys
p, t = sys.argv[1], sys.argv[2]
s = open(p).read()
i = s.index('#define FA2_SM90A_TILES(X)')
j = s.index('// Sm90Traits<D>::type ships')
open(p, 'w').write(s[:i] + '#define FA2_SM90A_TILES(X) ' + t + '\n\n' + s[j:])
PY
N=$(bash "$K"/cuda12.sh)
cd "$d" && $N -O3 -std=c++17 -Xptxas -v -cubin -gencode arch=compute_90a,code=sm_90a fa2_sm90a.cu -o "$out/c_$name.cubin" 2>&1 |
  grep -E "entry|spill" | paste - - |
  sed -E "s/.*function '([a-z0-9_]+)'.*frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads/$name \1 st \2 ld \3/"
