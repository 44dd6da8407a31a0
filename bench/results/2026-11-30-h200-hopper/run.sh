#!/usr/bin/env bash
# hopper: one H200 call: the wgmma tile check (nvcc 13, sm_90a) + memcheck, and sdpa.py's cudnn backend on a few shapes.
set -uo pipefail
cd .build/hopper
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
nvcc -std=c++17 -arch=sm_90a wgmma_check.cu -o wgmma_check 2>&1 | grep -v C7513
./wgmma_check 2>&1 | tee "$OUT/wgmma_check.log"
compute-sanitizer --tool memcheck ./wgmma_check 2>&1 | tail -4 | tee "$OUT/wgmma_memcheck.log"
cat > spec.json <<'S'
{"reps": 10, "warmup": 3, "backends": ["flash", "cudnn", "efficient"], "directions": ["fwd", "bwd"],
 "shapes": [{"b": 8, "hq": 16, "nq": 2048, "d": 128, "causal": false}, {"b": 8, "hq": 16, "nq": 2048, "d": 128, "causal": true},
            {"b": 16, "hq": 32, "nq": 1024, "d": 64, "causal": false},
            {"b": 2, "hq": 32, "hkv": 8, "nq": 512, "nk": 2048, "d": 128, "causal": true}]}
S
python3 sdpa.py spec.json > "$OUT/sdpa.json" 2> "$OUT/sdpa.log"; echo "sdpa.py rc $?"
tail -30 "$OUT/sdpa.log"
python3 sdpa.py --emulate-sm75 spec.json 2>&1 >/dev/null | grep -E "cudnn|flash" | head -4
