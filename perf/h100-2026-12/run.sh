#!/usr/bin/env bash
# NVIDIA H100 80GB HBM3 (3.35 TB/s): the self-test and KV-cache decode, beside PyTorch SDPA.
# Usage: perf/h100-2026-12/run.sh [PART...]  (default: env check decode); OUTDIR=dir writes elsewhere.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- env check decode
exec "$here/../publish.sh" "${OUTDIR:-$here}" 3.35 "$@"
