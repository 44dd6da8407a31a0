#!/usr/bin/env bash
# NVIDIA H100 80GB HBM3: fp16 and bf16 forward and backward (the Hopper kernels) on the FA2 paper shapes, beside PyTorch SDPA.
# Usage: perf/h100-2026-12-train/run.sh [PART...]  (default: env fp16 bf16); OUTDIR=dir writes elsewhere.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- env fp16 bf16
exec "$here/../publish.sh" "${OUTDIR:-$here}" 3.35 "$@"
