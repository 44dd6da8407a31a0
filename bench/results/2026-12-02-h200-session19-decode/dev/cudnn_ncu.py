"""cuDNN's decode kernels (SDPA, GQA) for ncu: three shapes, each called 3 times."""
import sys
import torch
sys.path.insert(0, "kernels/dev")
from decode_sidebyside import sdpa_calls, decode_inputs  # noqa: E402
for b, hq, hkv, d, n in ((1, 32, 8, 128, 1024), (1, 8, 1, 128, 4096), (1, 8, 1, 128, 32768)):
    q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
    torch.cuda.nvtx.range_push(f"shape {b} {hq}/{hkv} {d} {n}")
    for _ in range(3):
        cud()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("shape", b, hq, hkv, d, n, flush=True)
