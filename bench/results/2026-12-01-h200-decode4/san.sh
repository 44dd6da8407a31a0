#!/bin/bash
# decode4's second H200 call: memcheck and racecheck (side by side) on one small call of each fused kernel.
B=.build/decode4; R=$OUT/decode4; mkdir -p $R
cp $B/decode_sidebyside.py kernels/dev/decode_sidebyside.py
for tool in memcheck racecheck; do
  (timeout 45 compute-sanitizer --tool $tool --kernel-name kns=dev_decode python3 kernels/dev/decode_sidebyside.py --sanitize-fused $B/decode_fused.cubin > $R/san_$tool.txt 2>&1; echo "rc $?" >> $R/san_$tool.txt) &
done
wait
for tool in memcheck racecheck; do grep -v -E 'Warning|warn' $R/san_$tool.txt | tail -7; done
