#!/usr/bin/env bash
# bwd5 device call: D128 causal det with descending query blocks (mini sm_90 fatbin)
set -uo pipefail
B=.build/bwd5; O=$OUT/r; mkdir -p $O
date -u +"run %Y-%m-%dT%H:%M:%SZ" | tee $O/gpu.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/gpu.txt
(cd $B/root && PYTHONUNBUFFERED=1 timeout 100 python3 kernels/dev/sidebyside.py --bwd 2048 4096 8192 d128) >$O/side_d128.txt 2>&1; echo "side rc=$?"; cat $O/side_d128.txt
BWD_ONLY=sm80_d128 timeout 40 $B/bwd_check internal/kernels >$O/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $O/bwd_check.log | tail -8; grep -c "^ok " $O/bwd_check.log
for t in memcheck racecheck; do BWD_ONLY=dkdvqdet BWD_SHAPES=1,3 timeout 40 compute-sanitizer --tool $t --error-exitcode 9 $B/bwd_check internal/kernels >$O/san_$t.log 2>&1; echo "san $t rc=$?"; tail -2 $O/san_$t.log; done
timeout 70 ncu -k regex:'fa2_bwd_(dkdv|dq)_sm80_d64$' -c 2 --set full -o $O/d64 python3 kernels/dev/sidebyside.py --bwd 4096 d64 >$O/ncu.log 2>&1; echo "ncu rc=$?"
ncu -i $O/d64.ncu-rep --page details > $O/ncu_details.txt 2>&1; grep -E "^  fa2_|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|Issue Slots Busy|Block Limit (Reg|Shared)|Executed Ipc A|Bank|L1/TEX Hit|Mem Busy|Max Bandwidth" $O/ncu_details.txt | head -50
ncu -i $O/d64.ncu-rep --page raw --csv > $O/ncu_raw.csv 2>/dev/null
tar -C $OUT -cJf $OUT/r.tar.xz r && rm -rf $O
