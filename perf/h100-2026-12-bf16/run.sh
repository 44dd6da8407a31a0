#!/usr/bin/env bash
# NVIDIA H100 80GB HBM3: bf16 forward (the Hopper kernels) and backward on the FA2 paper shapes, beside PyTorch SDPA in bf16.
# Usage: perf/h100-2026-12-bf16/run.sh [PART...]  (default: env bf16); OUTDIR=dir writes elsewhere.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- env bf16
exec "$here/../publish.sh" "${OUTDIR:-$here}" 3.35 "$@"
