#!/usr/bin/env bash
# NVIDIA H100 80GB HBM3: the kernel ladder of tutorial chapter 6 (fp16 forward, D 64), each rung
# checked and then timed, with rung 4 without its swizzle (rung4_noswizzle.cuh: notebook 06's
# exercise 2) compiled at run time with NVRTC beside it; on the sm_80 kernels and on the sm_75
# kernels forced through their PTX.
# Usage: perf/h100-2026-12-ladder/run.sh [PART...]  (default: env ladder ladder75); OUTDIR=dir writes elsewhere.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- env ladder ladder75
RUNG_SOURCE=4=$here/rung4_noswizzle.cuh exec "$here/../publish.sh" "${OUTDIR:-$here}" 3.35 "$@"
