"""Side-by-side forward benchmark in ONE process on one GPU: PyTorch SDPA (flash,
efficient) and GoFlash's shipped kernels (internal/kernels/fa2.fatbin, launched
through the driver API with ctypes, as the Go code launches them), interleaved
call by call on the same tensors, so clock drift hits all three alike.

Shapes as the FA2 paper: 16k tokens (B = 16384/N), hidden 2048 (H = 2048/D).
FLOPs = 4*B*H*N*N*D, halved when causal. Median of 20 CUDA-event-timed calls
after 3 warm-ups. Before timing, each shape's output is checked against SDPA's
math backend in float32.

Usage: python3 kernels/dev/sidebyside.py [--ptx75] [N ...]   (from the repo root)
"""
import ctypes
import math
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class FwdParams(ctypes.Structure):  # kernels/params.cuh
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "lse")] + \
               [(n, ctypes.c_int64) for n in ("qb", "qs", "qh", "kb", "ks", "kh", "vb", "vs", "vh", "ob", "os", "oh")] + \
               [(n, ctypes.c_int32) for n in ("b", "nq", "nk", "hq", "hkv", "d")] + \
               [("scale_log2", ctypes.c_float), ("scale", ctypes.c_float)]


assert ctypes.sizeof(FwdParams) == 168

cu = ctypes.CDLL("libcuda.so.1")


def ck(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        cu.cuGetErrorString(r, ctypes.byref(s))
        raise RuntimeError(f"{what}: {s.value.decode()}")


def tiles():
    """symbol -> (Br, warps, smem) from the tile table in the generated resources.md."""
    t, cols = {}, None
    for line in open("internal/kernels/resources.md"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "symbol":
            cols = cells if "Br" in cells else None
        elif cols and len(cells) == len(cols) and cells[0].startswith("fa2_fwd_"):
            r = dict(zip(cols, cells))
            t[r["symbol"]] = (int(r["Br"]), int(r["warps"]), int(r["dynamic smem bytes"]))
    return t


class Module:
    def __init__(self, path):
        torch.cuda.init()
        torch.empty(1, device="cuda")  # primary context current
        data = open(path, "rb").read() + b"\0"
        self.buf = ctypes.create_string_buffer(data, len(data))
        self.mod = ctypes.c_void_p()
        ck(cu.cuModuleLoadData(ctypes.byref(self.mod), self.buf), path)
        self.tiles = tiles()
        self.fns = {}

    def fn(self, sym):
        if sym not in self.fns:
            f = ctypes.c_void_p()
            ck(cu.cuModuleGetFunction(ctypes.byref(f), self.mod, sym.encode()), sym)
            br, warps, smem = self.tiles[sym]
            ck(cu.cuFuncSetAttribute(f, 8, smem), "max dynamic smem")  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.fns[sym] = (f, br, warps, smem)
        return self.fns[sym]

    def launcher(self, sym, q, k, v, o, lse):
        """q, k, v, o: (B, N, H, D) fp16 contiguous (BSHD); lse: (B, H, N) fp32.
        Returns a call with its arguments built once (the timed part is the launch)."""
        f, br, warps, smem = self.fn(sym)
        b, n, h, d = q.shape
        nk, hkv = k.shape[1], k.shape[2]
        p = FwdParams(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                      *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                      b, n, nk, h, hkv, d, 1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d))
        args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        grid = ((n + br - 1) // br, b * h, 1, warps * 32, 1, 1, smem)

        def call():
            ck(cu.cuLaunchKernel(f, *grid, stream, args, None), sym)
        call.keep = (p, args)  # the parameter block must outlive every launch
        return call


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)  # GPU busy while the host enqueues: host overhead stays out of the time
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return ts


def main():
    args = sys.argv[1:]
    ptx75 = "--ptx75" in args
    ns = [int(a) for a in args if a.isdigit()] or [512, 1024, 2048, 4096, 8192, 16384]
    path = "internal/kernels/fa2_sm75.ptx" if ptx75 else "internal/kernels/fa2.fatbin"
    arch = 75 if ptx75 else 80
    m = Module(path)
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__, "ours:", path, flush=True)
    print(f"{'D':>4} {'causal':>6} {'N':>6} | {'flash':>7} {'effic.':>7} {'ours':>7} TFLOP/s | ours/flash ours/eff | max|err| vs fp32 (flash's)")
    for d in (64, 128):
        for causal in (False, True):
            sym = f"fa2_fwd_sm{arch}_d{d}" + ("_causal" if causal else "")
            for n in ns:
                b, h = 16384 // n, 2048 // d
                q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # SDPA's own (B, H, N, D)
                ours = m.launcher(sym, q, k, v, o, lse)
                ours()
                # Correctness on this shape: first 2 batches against fp32 math.
                with sdpa_kernel(SDPBackend.MATH):
                    ref = F.scaled_dot_product_attention(qt[:2].float(), kt[:2].float(), vt[:2].float(), is_causal=causal)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    fl = F.scaled_dot_product_attention(qt[:2], kt[:2], vt[:2], is_causal=causal)
                err = (o[:2].transpose(1, 2).float() - ref).abs().max().item()
                ferr = (fl.float() - ref).abs().max().item()
                del ref, fl
                sdpa = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                ts = {"flash": [], "efficient": [], "ours": []}
                for _ in range(4):  # interleave: 4 rounds of 5 timed calls each
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        ts["flash"] += timed(sdpa, 5)
                    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                        ts["efficient"] += timed(sdpa, 5)
                    ts["ours"] += timed(ours, 5)
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                tf = {k2: flops / sorted(t)[len(t) // 2] / 1e9 for k2, t in ts.items()}
                print(f"{d:>4} {int(causal):>6} {n:>6} | {tf['flash']:7.1f} {tf['efficient']:7.1f} {tf['ours']:7.1f}         | "
                      f"{tf['ours'] / tf['flash']:10.2f} {tf['ours'] / tf['efficient']:7.2f} | {err:.2e} ({ferr:.2e})"
                      + ("  FAIL" if not err <= 2 * ferr + 1e-6 else ""), flush=True)
                del q, k, v, o, lse, qt, kt, vt


if __name__ == "__main__":
    main()
