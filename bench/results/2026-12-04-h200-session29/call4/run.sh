#!/usr/bin/env bash
# Session 29, call 4: the L2 fabric (ltcfabric2ltc) per DRAM byte for ours (16 / 32 splits, the (B, Hkv, N, D)
# cache) and cuDNN, D64 128k; cuDNN's load instructions (SASS).
set -uo pipefail
OUT=${OUT:-/tmp/out}; S=.build/s29
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__d_sectors_fill_device.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum
timeout 150 ncu --nvtx --nvtx-include "prof/" --metrics $M --csv --page raw python3 $S/ncu_decode2.py > "$OUT/fab.csv" 2>"$OUT/fab.err"; echo "ncu rc=$?"
python3 - "$OUT/fab.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
i = next(k for k, r in enumerate(rows) if r[0] == "ID")
hdr, data = rows[i], rows[i + 2:]
kn = hdr.index("Kernel Name")
for r in data:
    print(r[kn][:40], " ".join(f"{h.split('.')[0].replace('lts__','')}={r[hdr.index(h)]}" for h in hdr if "__" in h))
PY
timeout 120 ncu --nvtx --nvtx-include "prof/" -k regex:cudnn_generated -c 1 --section SourceCounters --print-source sass --page source python3 $S/ncu_decode2.py > "$OUT/cudnn_sass.txt" 2>&1; echo "sass rc=$?"
grep -oE "(LDG|LDGSTS|LDS|LDSM|UTMALDG|UBLKCP|STG|LDGDEPBAR|ARRIVES|SYNCS)[A-Z0-9_.]*" "$OUT/cudnn_sass.txt" | sort | uniq -c | sort -rn | head -30
xz -9 "$OUT/cudnn_sass.txt"
