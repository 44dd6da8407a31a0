"""PyTorch SDPA side of kernels/dev/fwd_check.cu's benchmark: same shapes (16k tokens,
hidden 2048, B = 16384/N, H = 2048/D), same timing (median of 20 CUDA-event-timed
calls after 3 warm-ups), same FLOP count (4*B*H*N*N*D, halved when causal).
Usage: python3 kernels/dev/sdpa_bench.py [N ...]"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ns = [int(a) for a in sys.argv[1:]] or [512, 1024, 2048, 4096, 8192, 16384]
dev = torch.device("cuda")
print("device", torch.cuda.get_device_name(), "torch", torch.__version__)
for d in (64, 128):
    for causal in (False, True):
        for n in ns:
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.float16) for _ in range(3))
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                with sdpa_kernel(be):
                    for _ in range(3):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    ts = []
                    for _ in range(20):
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        e1.record()
                        e1.synchronize()
                        ts.append(e0.elapsed_time(e1))
                ms = sorted(ts)[len(ts) // 2]
                print(f"sdpa {name:9s} D{d:<3d} causal={int(causal)} N={n:<5d} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s",
                      flush=True)
            del q, k, v
