# One decode shape, ours and cuDNN, each call inside an NVTX range "prof" (the L2 flush outside it),
# for ncu --nvtx --nvtx-include "prof/". Usage: python3 ncu_decode.py B HQ HKV D N
import sys
sys.path.insert(0, "kernels/dev")
import torch
import decode_sidebyside as ds
from sidebyside import Module
b, hq, hkv, d, n = (int(x) for x in sys.argv[1:6])
m = Module("internal/kernels/fa2.fatbin")
q, k, v, seqlens = ds.decode_inputs(b, n, hq, hkv, d, 1)
qt = q.transpose(1, 2)
kt, vt = k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
sd = ds.sdpa_calls(qt, kt, vt, hq, hkv)
o = torch.empty_like(q)
lse = torch.empty((b, hq, 1), device="cuda")
ours = ds.decode_call(m, 80, q, k, v, o, lse, seqlens)
print("splits", ours.splits, "merge_ctas", ours.merge_ctas, flush=True)
flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
for name, fn in (("ours", ours), ("cudnn", sd["cudnn"][0])):
    for _ in range(3):
        fn()
    for _ in range(2):
        flush.zero_()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        fn()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
print("done")
