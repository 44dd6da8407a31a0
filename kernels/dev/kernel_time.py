"""Kernel time beside SDPA flash, in ONE process on the same tensors: the sum of
the CUDA kernel times (torch.profiler) of one call of ours (the fatbin's default
single pass and the deterministic path, launched through the driver by
sidebyside.Module) and of SDPA flash's (autograd, BSHD storage viewed as
(B, H, N, D), as bench/sdpa.py). No host time on either side, so no autograd
overhead flatters ours. Shapes as the FA2 paper: 16k tokens (B = 16384/N),
hidden 2048 (H = 2048/D).

Usage (from the repo root): python3 kernels/dev/kernel_time.py [--fwdbwd] [N ...] [dD ...]
  default: the backward alone; --fwdbwd: forward then backward (a training
  step's attention); N default 2048 4096 8192, D default 64 128.
Prints ours/flash = flash's time / ours (above 1: ours is faster).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import sidebyside as sb  # same directory


def kernel_ms(fn, reps=10):
    """Per-call kernel time of fn by kernel name, ms (3 warm-up calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    tot = {}
    for e in p.events():
        if e.device_type.name == "CUDA":
            tot[e.name] = tot.get(e.name, 0) + e.device_time / reps / 1e3
    return tot


def main():
    args = sys.argv[1:]
    fwdbwd = "--fwdbwd" in args
    ns = [int(a) for a in args if a.isdigit()] or [2048, 4096, 8192]
    ds = [int(a[1:]) for a in args if a[:1] == "d" and a[1:].isdigit()] or [64, 128]
    m = sb.Module(*sb.images(("fwd", "bwd"), False))
    what = "forward+backward" if fwdbwd else "backward"
    print(f"kernel-level {what} on {torch.cuda.get_device_name()}, ms per call (sum of its kernels); "
          "ours/flash = flash time / ours", flush=True)
    for d in ds:
        for causal in (False, True):
            for n in ns:
                b, h = 16384 // n, 2048 // d
                q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
                o, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
                di = torch.empty_like(lse)
                g = tuple(torch.empty_like(x) for x in (q, k, v))
                fwd = m.forward(80, q, k, v, o, lse, causal)
                fwd()
                bwd = m.backward(80, q, k, v, o, do, lse, di, *g, causal)
                bdet = m.backward(80, q, k, v, o, do, lse, di, *g, causal, deterministic=True)
                qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
                for x in (qt, kt, vt):
                    x.requires_grad_(True)
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

                def flash():
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        if fwdbwd:
                            torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), dot)
                        else:
                            torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)

                ours = (lambda: (fwd(), bwd())) if fwdbwd else bwd
                det = (lambda: (fwd(), bdet())) if fwdbwd else bdet
                kf, ko, kd = kernel_ms(flash), kernel_ms(ours), kernel_ms(det)
                tf, to, td = sum(kf.values()), sum(ko.values()), sum(kd.values())
                print(f"D{d} causal={int(causal)} N{n}: flash {tf:.3f} ours {to:.3f} det {td:.3f} ms | ours/flash {tf / to:.3f} "
                      f"det/flash {tf / td:.3f} | ours: " + " ".join(f"{k2[:24]}={t:.3f}" for k2, t in ko.items()), flush=True)
                del q, k, v, do, o, lse, di, g, qt, kt, vt, dot, out, fwd, bwd, bdet, ours, det
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
