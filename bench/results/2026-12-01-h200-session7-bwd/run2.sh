#!/usr/bin/env bash
# session 7 call 2: pre zeroes the dQ accumulator, convert only reads (new fatbin): correctness, sanitizers, timings, ncu vs FA2
set -uo pipefail
B=.build/s7; mkdir -p $OUT
date -u
STEPS=${STEPS:-check san go bench ncu fb side}
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has check; then timeout 150 $B/bwd_check internal/kernels > $OUT/bwd_check.log 2>&1; echo "bwd_check rc=$?"; grep -v "^ok " $OUT/bwd_check.log | tail -8; fi
if has san; then
  for tool in memcheck racecheck; do
    BWD_ONLY="kvqsm80_d128_large|kvqsm80_d64_causal_large|kvqsm80_d256" BWD_SHAPES=1,3,7 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/bwd_check internal/kernels > $OUT/san_$tool.log 2>&1; echo "san $tool rc=$?"; tail -3 $OUT/san_$tool.log
  done
fi
if has go; then
  timeout 300 $B/flashattn.test -test.run 'TestGPU|KernelTable|BF16|Raw|Ladder|KVCache|Decode|Varlen' -test.count=1 -test.v > $OUT/gotest.log 2>&1; echo "go rc=$?"
  grep -E "^(--- FAIL|FAIL|ok|PASS|panic)" $OUT/gotest.log | head; grep -c "^--- PASS" $OUT/gotest.log; grep -c "^--- SKIP" $OUT/gotest.log
fi
if has bench; then BWD_BENCH=1 BWD_ONLY="_large" timeout 100 $B/bwd_check internal/kernels > $OUT/bwdbench.log 2>&1; echo "bwdbench rc=$?"; grep ^bench $OUT/bwdbench.log | awk '{print $2,$3,$4,$6,$9,$11,$13}'; fi
if has ncu; then
  M=smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_global_red.sum,lts__t_sectors_op_red.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_ldgsts.sum,smsp__inst_executed_op_branch.sum,smsp__inst_executed_op_bar.sum
  for sh in "128 2048" "64 2048"; do
    timeout 150 ncu --kernel-name regex:"fa2_bwd_dkdvq_sm80|flash_bwd_dq_dk_dv" --launch-count 4 --metrics $M --csv --page raw python3 $B/ncu_bwd.py $sh > $OUT/ncu_${sh// /_}.csv 2> $OUT/ncu_${sh// /_}.err; echo "ncu $sh rc=$?"
    grep -v "^==PROF==\|^ok" $OUT/ncu_${sh// /_}.csv > $OUT/ncu_${sh// /_}.clean.csv; python3 $B/ncu_cmp.py $OUT/ncu_${sh// /_}.clean.csv
  done
fi
if has fb; then
  timeout 240 $B/goflash bench --seqlens 2048,4096,8192 --headdims 64,128 --direction both --compare-torch --out $OUT/fb > $OUT/bench_fwdbwd.txt 2>&1; echo "bench rc=$?"
  grep -A60 "^goflash bench on" $OUT/bench_fwdbwd.txt | grep -v "^wrote"
fi
if has side; then PYTHONUNBUFFERED=1 timeout 150 python3 kernels/dev/sidebyside.py --bwd 2048 8192 > $OUT/bwd_sidebyside.log 2>&1; echo "side rc=$?"; grep -v Warning $OUT/bwd_sidebyside.log | grep -v "return Variable" ; fi
rm -rf $OUT/fb/bench.html
