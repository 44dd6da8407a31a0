#!/bin/bash
# decode3's one H200 call: GPU tests of the in-place append, then the decode profile.
B=.build/decode3; R=$OUT/decode3; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch;print('torch',torch.__version__)"; } > $R/machine.txt 2>&1
xz -dc $B/flashattn.test.xz > /tmp/fa.test && chmod +x /tmp/fa.test
cp $B/decode_sidebyside.py kernels/dev/decode_sidebyside.py
(cd flashattn && timeout 40 /tmp/fa.test -test.run 'TestGPUKVCache|TestGPUBenchKVCache' -test.v -test.count 1) > $R/gotest.txt 2>&1; echo "rc $?" >> $R/gotest.txt
grep -E '^(---|ok|FAIL|PASS)|append|32k decode|rc ' $R/gotest.txt | grep -v '    --- PASS' | tail -40
timeout 60 python3 kernels/dev/decode_sidebyside.py --profile $B/decode_fused.cubin > $R/profile.txt 2>&1; echo "rc $?" >> $R/profile.txt
cat $R/profile.txt | tail -25
(cd flashattn && timeout 25 compute-sanitizer --tool memcheck /tmp/fa.test -test.run 'TestGPUKVCacheConformance/path0-splits3/append|TestGPUKVCacheAppendDevice' -test.count 1) > $R/memcheck-append.txt 2>&1; echo "rc $?" >> $R/memcheck-append.txt
tail -4 $R/memcheck-append.txt
tar czf $OUT/decode3.tgz -C $OUT decode3
