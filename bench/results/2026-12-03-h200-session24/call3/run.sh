#!/bin/bash
# session 24 call 3: the TMA bulk-copy read floor of B 1 decode calls beside the 16-byte-load floor,
# the shipped decode kernel and cuDNN (dev/bulkread.py; cubins built here: dev/bulkread.cu by nvcc 12.4
# -arch=sm_90a, session 20's dev/readfloor.cu by nvcc 11.8 -arch=sm_90)
cd "$(dirname "$0")/../../../.."
cp .build/c3/small.fatbin internal/kernels/fa2.fatbin
timeout 400 python3 bench/results/2026-12-03-h200-session24/dev/bulkread.py .build/c3/bulkread.cubin .build/c3/readfloor.cubin 2>&1 | tee $OUT/bulkread.txt
