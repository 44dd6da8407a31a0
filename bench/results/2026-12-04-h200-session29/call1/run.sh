#!/usr/bin/env bash
# Session 29, call 1 (carry .build/s29): the shipped build's GPU tests beyond call 3 of session 28 (every
# GPU test that runs the Hopper kernels or the default path, bar the ones it ran), then ncu on the D64
# decode beside cuDNN (32/8 D64 128k and 32k, B 1).
set -uo pipefail
OUT=${OUT:-/tmp/out}; B=/tmp/c1
mkdir -p "$OUT" $B; xz -dc .build/s29/b1.tar.xz | tar -xf - -C $B
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
t0=$SECONDS
(cd flashattn && timeout 330 $B/flashattn.test -test.run 'TestGPU|TestHopper' -test.skip 'SM75|SM80|Smem99|BF16|Varlen|KVCache|TestGPUConformance$|TestGPUHopperForward$|TestGPUTwoDevices' -test.v -test.count=1 >"$OUT/test.txt" 2>&1); echo "test rc=$? $((SECONDS-t0))s"
grep -cE "^\s*--- PASS" "$OUT/test.txt"; grep -cE "^\s*--- SKIP" "$OUT/test.txt"; grep -E "^--- |^\s*--- FAIL|^(FAIL|ok|PASS|panic)" "$OUT/test.txt" | head -40
for shape in "1 32 8 64 131072" "1 32 8 64 32768" "1 32 8 128 131072"; do
  tag=$(echo $shape | tr ' ' _)
  timeout 120 ncu --nvtx --nvtx-include "prof/" --set full -o "$OUT/dec_$tag" -f python3 .build/s29/ncu_decode.py $shape > "$OUT/ncu_$tag.log" 2>&1; echo "ncu $tag rc=$? $((SECONDS-t0))s"
  tail -3 "$OUT/ncu_$tag.log"
  ncu -i "$OUT/dec_$tag.ncu-rep" --page details --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats > "$OUT/ncu_$tag.txt" 2>&1
  ncu -i "$OUT/dec_$tag.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__sectors_read.sum > "$OUT/ncu_${tag}_raw.csv" 2>&1
done
echo "all done $((SECONDS-t0))s"
