#!/usr/bin/env bash
# Session 29, call 3: where ours spends L2 throughput (D64 and D128 decode beside cuDNN, 128k, B 1):
# the breakdown of lts__throughput and the L2 request/sector counts.
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=.build/s29
for shape in "1 32 8 64 131072" "1 32 8 128 131072"; do
  tag=$(echo $shape | cut -d' ' -f4)
  timeout 150 ncu --nvtx --nvtx-include "prof/" --metrics breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex.sum,lts__t_sectors_srcunit_tex.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__cycles_elapsed.avg.per_second,sm__cycles_elapsed.avg.per_second,l1tex__m_xbar2l1tex_read_sectors.sum,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_write.sum --csv --page raw python3 $S/ncu_decode.py $shape > "$OUT/l2_$tag.csv" 2>"$OUT/l2_$tag.err"; echo "ncu $tag rc=$?"
done
python3 - "$OUT" <<'PY'
import csv, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/l2_*.csv")):
    rows = [r for r in csv.reader(open(f)) if r]
    i = next(k for k, r in enumerate(rows) if r and r[0] == "ID")
    hdr, rows = rows[i], rows[i + 2:]
    kn = hdr.index("Kernel Name")
    print("==", f)
    for r in rows:
        print(r[kn][:40])
        for h, v in zip(hdr, r):
            if "__" in h: print(f"   {h} = {v}")
PY
