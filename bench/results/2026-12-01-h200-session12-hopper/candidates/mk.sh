#!/usr/bin/env bash
# mk.sh NAME TILES-LINE [sed-expr-for-fwd_sm90.cuh]: a candidate cubin from a copy of kernels/
set -euo pipefail
name=$1; tiles=$2; expr=${3:-}; texpr=${4:-}
d=/tmp/cand/$name; rm -rf $d; mkdir -p $d
cp /work/main/kernels/*.cuh /work/main/kernels/fa2_sm90a.cu $d/
python3 - "$d/traits.cuh" "$tiles" <<'PY'
import sys,re
p,t=sys.argv[1],sys.argv[2]
s=open(p).read()
i=s.index('#define FA2_SM90A_TILES(X)')
j=s.index('// Sm90Traits<D>::type ships.')
s=s[:i]+'#define FA2_SM90A_TILES(X) '+t+'\n\n'+s[j:]
open(p,'w').write(s)
PY
if [ -n "$expr" ]; then python3 -c "
import sys
p='$d/fwd_sm90.cuh'; s=open(p).read()
exec(open('$expr').read())
open(p,'w').write(s)"; fi
if [ -n "$texpr" ]; then python3 -c "
p='$d/traits.cuh'; s=open(p).read()
exec(open('$texpr').read())
open(p,'w').write(s)"; fi
N=$(bash /work/main/kernels/cuda12.sh)
cd $d && $N -O3 -std=c++17 -Xptxas -v -cubin -gencode arch=compute_90a,code=sm_90a fa2_sm90a.cu -o /work/main/.build/s12/c_$name.cubin 2>&1 | grep -E "entry|spill" | paste - - | sed -E "s/.*function '([a-z0-9_]+)'.*frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads/$name \1 st \2 ld \3/"
