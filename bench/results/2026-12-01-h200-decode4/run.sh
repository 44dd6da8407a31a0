#!/bin/bash
# decode4's H200 call: the decode profile with fused2/fused3 (parallel last-CTA merges), then
# memcheck and racecheck on one small call of each fused kernel.
B=.build/decode4; R=$OUT/decode4; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch;print('torch',torch.__version__)"; } > $R/machine.txt 2>&1
cp $B/decode_sidebyside.py kernels/dev/decode_sidebyside.py
timeout 60 python3 kernels/dev/decode_sidebyside.py --profile $B/decode_fused.cubin > $R/profile.txt 2>&1; echo "rc $?" >> $R/profile.txt
grep -v -E 'Warning|return F' $R/profile.txt | tail -30
for tool in memcheck racecheck; do
  timeout 30 compute-sanitizer --tool $tool --kernel-name regex:dev_decode python3 kernels/dev/decode_sidebyside.py --sanitize-fused $B/decode_fused.cubin > $R/san_$tool.txt 2>&1; echo "rc $?" >> $R/san_$tool.txt
  tail -6 $R/san_$tool.txt
done
tar czf $OUT/decode4.tgz -C $OUT decode4
