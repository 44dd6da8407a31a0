#!/bin/bash
# session 24 call 2: the GPU tests call 1's run left unrun at its 470 s limit (the packed bf16 suites,
# default and deterministic; the D256 packed deterministic repeats; the varlen errors and bench)
cd "$(dirname "$0")/../../../.."
tar xJf .build/c1/b.tar.xz -C .build/c1 && cp .build/c1/small.fatbin internal/kernels/fa2.fatbin
B=$PWD/.build/c1/flashattn.test
cd flashattn
( time timeout 500 $B -test.run 'TestGPUVarlenBF16$|TestGPUVarlenErrors$|TestGPUVarlenDeterministicRepeats$|TestGPUBenchVarlen$' -test.count=1 -test.v ) > $OUT/gpu2.txt 2>&1
echo "== gpu2"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^real|panic" $OUT/gpu2.txt | head -20; echo "pass $(grep -c -- '--- PASS' $OUT/gpu2.txt) fail $(grep -c -- '--- FAIL' $OUT/gpu2.txt)"
grep -E "^--- |^    --- (PASS|FAIL): TestGPUVarlenDeterministicRepeats" $OUT/gpu2.txt
grep -B2 -A6 -- "--- FAIL" $OUT/gpu2.txt | head -40
xz -9 $OUT/gpu2.txt
