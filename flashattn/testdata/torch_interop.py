#!/usr/bin/env python3
"""PyTorch <-> GoFlash interop on one GPU: GoFlash computes in PyTorch's memory.

PyTorch allocates and fills q, k, v and dO (BSHD, and a packed-QKV layout
whose gradients are packed too) and allocates O, the LSE, Di and the
gradients, poisoned with NaN. The script exports each CUDA allocation
holding them with cuIpcGetMemHandle, writes the handles, byte offsets and
strides to a JSON file, and runs the Go test binary (TestGPUTorchInterop in
flashattn/gpu_interop_test.go) as a child process: it maps the allocations
(cuIpcOpenMemHandle, no copy) and enqueues GoFlash's raw forward and backward
calls on them. The script then checks, in PyTorch, what GoFlash wrote into
its tensors against SDPA's math backend (below).

The GPU machine has no Go; build the binary where Go is:

    CGO_ENABLED=0 go test -c -o flashattn.test ./flashattn
    python3 flashattn/testdata/torch_interop.py ./flashattn.test [OUTDIR]

It prints one line per checked quantity and a verdict (INTEROP PASS or
INTEROP FAIL, exit status 0 or 1), and writes OUTDIR/interop.json.

Why the driver's handle and not `storage._share_cuda_()`: that returns
PyTorch's own sharing record (its handle format, a reference-counting file
and an event for its own consumers in torch.multiprocessing), while any CUDA
program can open what cuIpcGetMemHandle exports; the base address and the
tensor's offset in it come from cuMemGetAddressRange. The script logs what
_share_cuda_ returns beside it, for comparison. IPC needs cudaMalloc'ed
memory, so the caching allocator's expandable segments (cuMemMap) are
turned off below.

The check is FlashAttention-2's rule, the one flashattn/attntest applies:
GoFlash's largest error against the truth (SDPA math in fp64, autograd for
the gradients) must be at most twice that of PyTorch's math backend run in
the same low precision (fp32 for the LSE), plus 4 unit roundoffs of that
precision times the truth's largest magnitude; and nothing may stay NaN.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False"  # IPC needs cudaMalloc memory

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}

cu = ctypes.CDLL("libcuda.so.1")


def check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


class Segments:
    """The CUDA allocations holding the tensors, each exported once."""

    def __init__(self):
        self.bases, self.handles, self.share_cuda = [], [], []

    def locate(self, t):
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        check(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(t.data_ptr())),
              "cuMemGetAddressRange")
        if base.value not in self.bases:
            h = (ctypes.c_ubyte * 64)()
            check(cu.cuIpcGetMemHandle(h, ctypes.c_uint64(base.value)), "cuIpcGetMemHandle")
            self.bases.append(base.value)
            self.handles.append(bytes(h).hex())
            try:
                rec = t.untyped_storage()._share_cuda_()
                self.share_cuda.append({"handle_bytes": len(rec[1]), "storage_offset_bytes": rec[3],
                                        "driver_offset_bytes": t.untyped_storage().data_ptr() - base.value})
            except Exception as e:  # only logged: the driver's handle is what Go opens
                self.share_cuda.append({"error": str(e)})
        return self.bases.index(base.value), t.data_ptr() - base.value


def span_bytes(t):
    return t.element_size() * (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())))


def operand(seg, t, exact):
    """A BSHD tensor (or a float32 buffer) as the Go test reads it."""
    h, off = seg.locate(t)
    op = {"handle": h, "offset": off, "bytes": span_bytes(t) if exact else 0}
    if t.dim() == 4:
        op["strides"] = list(t.stride())
    return op


def nan_like(shape, dtype, dev):
    return torch.full(shape, float("nan"), dtype=dtype, device=dev)


def problem(name, dtype, b, n, hq, hkv, d, causal, packed, dev, gen):
    """Inputs and NaN-poisoned outputs of one problem, in PyTorch's memory."""
    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=dev, dtype=torch.float32).to(dtype)
    p = {"name": name, "dtype": dtype, "b": b, "n": n, "hq": hq, "hkv": hkv, "d": d, "causal": causal}
    if packed:  # (B, N, Hq + 2 Hkv, D): one projection's output, q, k, v its views; dQKV likewise
        qkv = randn(b, n, hq + 2 * hkv, d)
        p["q"], p["k"], p["v"] = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
        dqkv = nan_like((b, n, hq + 2 * hkv, d), dtype, dev)
        p["dq"], p["dk"], p["dv"] = dqkv[:, :, :hq], dqkv[:, :, hq:hq + hkv], dqkv[:, :, hq + hkv:]
        # O in BHSD memory, seen as BSHD: the strides carry the layout.
        p["out"] = nan_like((b, hq, n, d), dtype, dev).transpose(1, 2)
    else:
        p["q"], p["k"], p["v"] = randn(b, n, hq, d), randn(b, n, hkv, d), randn(b, n, hkv, d)
        p["dq"], p["dk"], p["dv"] = (nan_like(x.shape, dtype, dev) for x in (p["q"], p["k"], p["v"]))
        p["out"] = nan_like((b, n, hq, d), dtype, dev)
    p["dout"] = randn(b, n, hq, d)
    p["lse"] = nan_like((b, hq, n), torch.float32, dev)
    p["di"] = nan_like((b, hq, n), torch.float32, dev)
    return p


def calls(seg, p):
    dims = {"B": p["b"], "Nq": p["n"], "Nk": p["n"], "Hq": p["hq"], "Hkv": p["hkv"], "D": p["d"]}
    ops = {x: operand(seg, p[x], exact=x not in ("q", "k", "v")) for x in ("q", "k", "v", "out", "lse")}
    fwd = {"name": p["name"] + " fwd", "backward": False, "dtype": NAME[p["dtype"]], "dims": dims, "causal": p["causal"], "ops": ops}
    bops = dict(ops)
    bops.update({x: operand(seg, p[x], exact=True) for x in ("dout", "dq", "dk", "dv", "di")})
    bwd = dict(fwd, name=p["name"] + " bwd", backward=True, ops=bops)
    return [fwd, bwd]


def sdpa(q, k, v, causal, dout, dtype):
    """SDPA's math backend on BSHD tensors computed in dtype: O, the LSE
    (natural log, (B, H, N)) and the gradients (autograd)."""
    q, k, v = (x.detach().to(dtype).transpose(1, 2).requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    o.backward(dout.to(dtype).transpose(1, 2))
    g = q.shape[1] // k.shape[1]
    s = (q.detach() @ k.detach().repeat_interleave(g, 1).transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:  # Nq == Nk: top-left and bottom-right alignment agree
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return {"out": o.detach().transpose(1, 2), "lse": torch.logsumexp(s, -1),
            "dq": q.grad.transpose(1, 2), "dk": k.grad.transpose(1, 2), "dv": v.grad.transpose(1, 2)}


def verdict(p):
    """GoFlash's outputs in p against SDPA math by FA2's rule: the truth in
    fp64, the baseline PyTorch's own result in p's dtype (fp32 for the LSE,
    which every backend keeps in fp32)."""
    args = (p["q"], p["k"], p["v"], p["causal"], p["dout"])
    truth, low, f32 = sdpa(*args, torch.float64), sdpa(*args, p["dtype"]), sdpa(*args, torch.float32)
    rows = []
    for x in ("out", "lse", "dq", "dk", "dv"):
        got, want = p[x].double(), truth[x]
        base = f32 if x == "lse" else low
        u = 2.0**-24 if x == "lse" else UNIT_ROUNDOFF[p["dtype"]]
        err = (got - want).abs().max().item()
        base_err = (base[x].double() - want).abs().max().item()
        floor = 4 * u * want.abs().max().item()
        ok = bool(torch.isfinite(got).all()) and err <= 2 * base_err + floor
        rows.append({"problem": p["name"], "dtype": NAME[p["dtype"]], "quantity": x, "goflash_err": err,
                     "baseline_err": base_err, "baseline": "torch fp32" if x == "lse" else "torch " + NAME[p["dtype"]],
                     "floor": floor, "pass": ok})
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    outdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="goflash-interop-")
    os.makedirs(outdir, exist_ok=True)
    dev = torch.device("cuda:0")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 baseline is fp32
    gen = torch.Generator(device=dev).manual_seed(12)
    probs = []
    for dtype in (torch.float16, torch.bfloat16):
        probs.append(problem(f"{NAME[dtype]} BSHD GQA causal D64", dtype, 2, 300, 8, 2, 64, True, False, dev, gen))
        probs.append(problem(f"{NAME[dtype]} packed QKV D128", dtype, 2, 257, 4, 4, 128, False, True, dev, gen))
    seg = Segments()
    spec = {"calls": [c for p in probs for c in calls(seg, p)]}
    spec["handles"] = seg.handles
    torch.cuda.synchronize()  # PyTorch's writes land before GoFlash reads
    path = os.path.join(outdir, "handles.json")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    env = dict(os.environ, GOFLASH_TORCH_INTEROP=path)
    child = subprocess.run([binary, "-test.run=^TestGPUTorchInterop$", "-test.v", "-test.count=1"],
                           env=env, capture_output=True, text=True)
    print(child.stdout + child.stderr)
    torch.cuda.synchronize()
    rows = []
    if child.returncode == 0 and "GOFLASH_INTEROP_DONE" in child.stdout:
        for p in probs:
            rows += verdict(p)
    for r in rows:
        print(f"{r['problem']:28s} {r['quantity']:4s} |err| goflash {r['goflash_err']:.3e}, {r['baseline']} "
              f"{r['baseline_err']:.3e}, floor {r['floor']:.1e}: {'ok' if r['pass'] else 'FAIL'}")
    ok = child.returncode == 0 and len(rows) == 5 * len(probs) and all(r["pass"] for r in rows)
    result = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(dev),
              "driver_handles": len(seg.handles), "share_cuda": seg.share_cuda,
              "go_test_exit": child.returncode, "rows": rows, "pass": ok}
    with open(os.path.join(outdir, "interop.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"share_cuda_ records (for comparison): {seg.share_cuda}")
    print("INTEROP PASS: GoFlash read PyTorch's tensors and wrote its outputs into PyTorch's memory, matching SDPA"
          if ok else "INTEROP FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
