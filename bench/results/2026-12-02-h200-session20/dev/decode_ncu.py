"""Session 20 dev: ncu of the shipped decode kernels beside cuDNN's on equal bytes: 32/8 D64 at 128k
(where cuDNN leads, 0.94x) and 32/8 D128 at 64k (where we lead, 1.03x); each call made twice, an L2
flush between (ncu's --cache-control all flushes before each profiled kernel too).
Usage: ncu ... python3 decode_ncu.py"""
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, sdpa_calls, decode_inputs  # noqa: E402

fat = Module("internal/kernels/fa2.fatbin")
for hq, hkv, d, n in ((32, 8, 64, 131072), (32, 8, 128, 65536)):
    q, k, v, sl = decode_inputs(1, n, hq, hkv, d, n)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
    o, lse = torch.empty_like(q), torch.empty((1, hq, 1), device="cuda")
    ours = decode_call(fat, 80, q, k, v, o, lse, sl)
    for _ in range(2):
        ours()
        cud()
    torch.cuda.synchronize()
    print("shape", hq, hkv, d, n, "splits", ours.splits, flush=True)
