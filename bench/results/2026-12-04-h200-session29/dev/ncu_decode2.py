# D64 128k B1 32/8: ours contiguous (rule splits), ours at 32 splits, ours on the (B, Hkv, N, D) cache
# (strided view), cuDNN; each call in NVTX range "prof".
import sys
sys.path.insert(0, "kernels/dev")
import torch
import decode_sidebyside as ds
from sidebyside import Module
b, hq, hkv, d, n = 1, 32, 8, 64, 131072
m = Module("internal/kernels/fa2.fatbin")
q, k, v, seqlens = ds.decode_inputs(b, n, hq, hkv, d, 1)
qt = q.transpose(1, 2)
kt, vt = k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
cud = ds.sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
o = torch.empty_like(q)
lse = torch.empty((b, hq, 1), device="cuda")
calls = [("ours16", ds.decode_call(m, 80, q, k, v, o, lse, seqlens)),
         ("ours32", ds.decode_call(m, 80, q, k, v, o, lse, seqlens, splits=32)),
         ("ourshnd", ds.decode_call(m, 80, q, kt.transpose(1, 2), vt.transpose(1, 2), o, lse, seqlens)),
         ("cudnn", cud)]
flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
for name, fn in calls:
    for _ in range(3):
        fn()
    flush.zero_()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    fn()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(name, "done", flush=True)
