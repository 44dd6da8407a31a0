#!/usr/bin/env bash
# NVIDIA H100 80GB HBM3 (3.35 TB/s): fp16 forward and backward on the FA2 paper shapes and KV-cache decode, beside PyTorch SDPA.
# Usage: perf/h100-2026-12/run.sh [PART...]  (default: env check fp16 decode); OUTDIR=dir writes elsewhere.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- env check fp16 decode
exec "$here/../publish.sh" "${OUTDIR:-$here}" 3.35 "$@"
