"""Side-by-side benchmark in ONE process on one GPU: PyTorch SDPA (flash,
efficient) and GoFlash's shipped kernels (internal/kernels/fa2_fwd.fatbin and
fa2_bwd.fatbin, launched
through the driver API with ctypes, as the Go code launches them), interleaved
call by call on the same tensors, so clock drift hits all three alike.

Forward (default): Median of 20 CUDA-event-timed calls after 3 warm-ups; before
timing, each shape's output is checked against SDPA's math backend in float32.
--bwd: the backward pass (SDPA: the backward kernels autograd runs for each
backend; ours: the default path, FA2's single pass pre + dK/dV/dQ + dQ convert
where the fatbin has one for the head dim, else pre + dK/dV + dQ; "det": the
deterministic path, the single pass's ordered twin fa2_bwd_dkdvqdet_* where
the fatbin has one, else pre + dK/dV + dQ; "-" where it has neither), our O and LSE from our forward
kernel; each shape's gradients of both paths (batch 0, heads 0-3) are checked
against SDPA's float32 math backend, next to flash's error on the same slice,
and the det path is run twice and must repeat bit for bit.

Shapes as the FA2 paper: 16k tokens (B = 16384/N), hidden 2048 (H = 2048/D).
FLOPs = 4*B*H*N*N*D (times 2.5 for the backward, the paper's convention),
halved when causal.

Usage: [FA2_FATBIN_B=candidate.fatbin] python3 kernels/dev/sidebyside.py [--bwd] [--ptx75] [--smem99] [N ...] [dD ...]   (from the repo root)
  default N: 512..16384 forward, 2048 8192 backward; dD: head dims, default d64 d128;
  FA2_FATBIN_B (forward): a candidate build whose kernels of the same names are timed beside ours;
  path column: large = the _large single pass (where the device's opt-in shared memory fits
  it), single = the <= 99 KiB one, three = the three kernels; --smem99: choose the kernels
  as on an sm_86/89 (99 KiB opt-in: no _large set); --ptx75: the Turing kernels
  from internal/kernels/fa2_{fwd,bwd}_ptx75.fatbin through the driver's JIT.
"""
import ctypes
import os
import math
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

class BwdParams(ctypes.Structure):  # kernels/params.cuh
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "dout", "lse", "di", "dq", "dk", "dv")] + \
               [(f"s{i}", ctypes.c_int64) for i in range(24)] + \
               [(n, ctypes.c_int32) for n in ("b", "nq", "nk", "hq", "hkv", "d")] + \
               [("scale_log2", ctypes.c_float), ("scale", ctypes.c_float), ("dq_accum", ctypes.c_uint64),
                ("cu_seqlens_q", ctypes.c_uint64), ("cu_seqlens_k", ctypes.c_uint64), ("alibi_slopes", ctypes.c_uint64),
                ("window_left", ctypes.c_int32), ("window_right", ctypes.c_int32), ("softcap", ctypes.c_float),
                ("dq_accum_rows", ctypes.c_int32)]


assert ctypes.sizeof(BwdParams) == 352


cu = ctypes.CDLL("libcuda.so.1")


def ck(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        cu.cuGetErrorString(r, ctypes.byref(s))
        raise RuntimeError(f"{what}: {s.value.decode()}")


def tiles():
    """symbol -> (Br, Bc, warps, dynamic smem) from the tile tables of the generated resources.md."""
    t, cols = {}, None
    for line in open("internal/kernels/resources.md"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "symbol":
            cols = cells if "Br" in cells else None
        elif cols and len(cells) == len(cols) and cells[0].startswith("fa2_"):
            r = dict(zip(cols, cells))
            t[r["symbol"]] = (int(r["Br"]), int(r["Bc"]), int(r["warps"]), int(r.get("dynamic smem bytes", 0)))
    return t


def images(families, ptx75):
    """The committed images of kernel families ("fwd", "bwd", "decode"): their fatbins, or
    (ptx75) their Turing PTX."""
    return [f"internal/kernels/fa2_{f}{'_ptx75' if ptx75 else ''}.fatbin" for f in families]


class Module:
    """The kernels of one or more images (fatbins, PTX or cubins), each loaded as a module;
    fn finds a symbol in the first that has it."""

    def __init__(self, *paths):
        torch.cuda.init()
        torch.empty(1, device="cuda")
        self.bufs, self.mods = [], []
        for path in paths:
            data = open(path, "rb").read() + b"\0"
            self.bufs.append(ctypes.create_string_buffer(data, len(data)))
            self.mods.append(ctypes.c_void_p())
            ck(cu.cuModuleLoadData(ctypes.byref(self.mods[-1]), self.bufs[-1]), path)
        self.tiles = tiles()
        self.fns = {}
        # Opt-in shared memory per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN):
        # a _large single pass runs where it fits, as Go's kernels.LargeFits decides.
        dev, optin = ctypes.c_int(), ctypes.c_int()
        ck(cu.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        ck(cu.cuDeviceGetAttribute(ctypes.byref(optin), 97, dev), "smem opt-in")
        self.smem_optin = optin.value
        per_sm = ctypes.c_int()  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        ck(cu.cuDeviceGetAttribute(ctypes.byref(per_sm), 81, dev), "smem per SM")
        self.smem_per_sm = per_sm.value

    def fn(self, sym):
        if sym not in self.fns:
            f, r = ctypes.c_void_p(), 500  # CUDA_ERROR_NOT_FOUND
            for mod in self.mods:
                r = cu.cuModuleGetFunction(ctypes.byref(f), mod, sym.encode())
                if r == 0:
                    break
            ck(r, sym)
            br, bc, warps, smem = self.tiles[sym]
            if smem > 48 * 1024:
                ck(cu.cuFuncSetAttribute(f, 8, smem), "max dynamic smem")
            self.fns[sym] = (f, br, bc, warps, smem)
        return self.fns[sym]

    def forward(self, arch, q, k, v, o, lse, causal):
        """q, k, v, o: (B, N, H, D) fp16 contiguous (BSHD); lse: (B, H, N) fp32.
        Returns the call with its arguments built once (the timed part is the launch)."""
        sym = f"fa2_fwd_sm{arch}_d{q.shape[3]}" + ("_causal" if causal else "")
        f, br, bc, warps, smem = self.fn(sym)
        b, n, h, d = q.shape
        p = FwdParams(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                      *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                      b, n, k.shape[1], h, k.shape[2], d, 1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d))
        args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        grid = ((n + br - 1) // br, b * h, 1, warps * 32, 1, 1, smem)

        def call():
            ck(cu.cuLaunchKernel(f, *grid, stream, args, None), sym)
        call.keep = (p, args)  # the parameter block must outlive every launch
        return call

    def single_sfx(self, arch, d):
        """The single pass's symbol suffix: its _large set where every one of its kernels fits."""
        sfx = f"_sm{arch}_d{d}"
        if all(self.tiles.get("fa2_bwd_dkdvq" + sfx + "_large" + c, (0, 0, 0, 1 << 30))[3] <= self.smem_optin for c in ("", "_causal")):
            return sfx + "_large"
        return sfx

    def backward(self, arch, q, k, v, o, do, lse, di, dq, dk, dv, causal, deterministic=False):
        """All BSHD fp16 contiguous; lse, di (B, H, N) fp32. Returns the call: pre, dkdvq (deterministic:
        dkdvqdet), dqconv (the single pass, where the fatbin has one for D) or pre, dkdv, dq."""
        b, n, h, d = q.shape
        nk, hkv = k.shape[1], k.shape[2]
        sfx = f"_sm{arch}_d{d}"
        cs = "_causal" if causal else ""
        qsfx = self.single_sfx(arch, d)
        fused = ("fa2_bwd_dkdvqdet" if deterministic else "fa2_bwd_dkdvq") + qsfx + cs
        single = fused in self.tiles
        pre = self.fn("fa2_bwd_pre" + sfx)
        kv = self.fn(fused if single else "fa2_bwd_dkdv" + sfx + cs)
        dqk = self.fn("fa2_bwd_dqconv" + qsfx if single else "fa2_bwd_dq" + sfx + cs)
        acc = None
        rows = 0
        if single:  # fp32 (B, H, ceil(N/Br)*Br, D), which the pre kernel zeroes
            rows = (n + kv[1] - 1) // kv[1] * kv[1]  # det: then one int32 counter per query block, starting and left zero
            acc = torch.zeros(b * h * rows * d + (b * h * rows // kv[1] if deterministic else 0), device="cuda", dtype=torch.float32)
        strides = [*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], *do.stride()[:3],
                   *dq.stride()[:3], *dk.stride()[:3], *dv.stride()[:3]]
        p = BwdParams(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(), lse.data_ptr(),
                      di.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), *strides,
                      b, n, nk, h, hkv, d, 1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d),
                      acc.data_ptr() if single else 0, dq_accum_rows=rows)
        args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        launches = [
            (pre[0], (n + pre[1] - 1) // pre[1], b * h, pre[3], pre[4]),
            (kv[0], (nk + kv[2] - 1) // kv[2], b * hkv, kv[3], kv[4]) if not (single and deterministic) else
            (kv[0], b * hkv, (nk + kv[2] - 1) // kv[2], kv[3], kv[4]),  # the ordered twin: heads fastest
            (dqk[0], (n + dqk[1] - 1) // dqk[1], b * h, dqk[3], dqk[4]),
        ]

        def call():
            for f, gx, gy, warps, smem in launches:
                ck(cu.cuLaunchKernel(f, gx, gy, 1, warps * 32, 1, 1, smem, stream, args, None), "bwd")
        call.keep = (p, args, acc)
        call.single = single
        call.large = single and qsfx != sfx
        return call


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)  # GPU busy (about 2 ms) while the host enqueues: host overhead (autograd: up to 0.3 ms) stays out of the time
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return ts


def forward(m, arch, ns, ds, mb=None):
    """mb: a second module (FA2_FATBIN_B) whose kernels of the same names are timed beside ours, as B."""
    print(f"{'D':>4} {'causal':>6} {'N':>6} | {'flash':>7} {'effic.':>7} {'ours':>7} TFLOP/s | ours/flash ours/eff | max|err| vs fp32 (flash's)"
          + (" | B TFLOP/s, B/ours, B's max|err|" if mb else ""))
    for d in ds:
        for causal in (False, True):
            for n in ns:
                b, h = 16384 // n, 2048 // d
                q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, N, D) views of our BSHD storage, as bench/sdpa.py
                ours = m.forward(arch, q, k, v, o, lse, causal)
                if mb:
                    ob, lseb = torch.full_like(q, float("nan")), torch.full_like(lse, float("nan"))
                    oursb = mb.forward(arch, q, k, v, ob, lseb, causal)
                    oursb()
                ours()
                # Correctness on this shape: first 2 batches against fp32 math.
                with sdpa_kernel(SDPBackend.MATH):
                    ref = F.scaled_dot_product_attention(qt[:2].float(), kt[:2].float(), vt[:2].float(), is_causal=causal)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    fl = F.scaled_dot_product_attention(qt[:2], kt[:2], vt[:2], is_causal=causal)
                err = (o[:2].transpose(1, 2).float() - ref).abs().max().item()
                errb = (ob[:2].transpose(1, 2).float() - ref).abs().max().item() if mb else 0.0
                ferr = (fl.float() - ref).abs().max().item()
                del ref, fl
                sdpa = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                ts = {"flash": [], "efficient": [], "ours": []} | ({"b": []} if mb else {})
                for _ in range(4):  # interleave: 4 rounds of 5 timed calls each
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        ts["flash"] += timed(sdpa, 5)
                    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                        ts["efficient"] += timed(sdpa, 5)
                    ts["ours"] += timed(ours, 5)
                    if mb:
                        ts["b"] += timed(oursb, 5)
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                tf = {k2: flops / sorted(t)[len(t) // 2] / 1e9 for k2, t in ts.items()}
                print(f"{d:>4} {int(causal):>6} {n:>6} | {tf['flash']:7.1f} {tf['efficient']:7.1f} {tf['ours']:7.1f}         | "
                      f"{tf['ours'] / tf['flash']:10.2f} {tf['ours'] / tf['efficient']:7.2f} | {err:.2e} ({ferr:.2e})"
                      + ("  FAIL" if not err <= 2 * ferr + 1e-6 else "")
                      + (f" | {tf['b']:7.1f} {tf['b'] / tf['ours']:5.2f} {errb:.2e}" + ("  FAIL" if not errb <= 2 * ferr + 1e-6 else "") if mb else ""),
                      flush=True)
                del q, k, v, o, lse, qt, kt, vt
                if mb:
                    del ob, lseb


def backward(m, arch, ns, ds):
    print(f"{'D':>4} {'causal':>6} {'N':>6} | {'flash':>7} {'effic.':>7} {'ours':>7} {'det':>7} bwd TFLOP/s | "
          "ours/flash det/flash ours/eff | path (ours/det) | max|err| vs fp32 math, ours (flash), det: dQ dK dV")
    fails = 0
    for d in ds:
        for causal in (False, True):
            for n in ns:
                b, h = 16384 // n, 2048 // d
                torch.manual_seed(n + d)
                q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
                di = torch.full_like(lse, float("nan"))
                grads = {}
                calls = {}
                has_det = f"fa2_bwd_dkdv_sm{arch}_d{d}" in m.tiles or "fa2_bwd_dkdvqdet" + m.single_sfx(arch, d) in m.tiles
                paths = ("ours", "det") if has_det else ("ours",)
                m.forward(arch, q, k, v, o, lse, causal)()
                for path in paths:
                    g = tuple(torch.full_like(x, float("nan")) for x in (q, k, v))
                    calls[path] = m.backward(arch, q, k, v, o, do, lse, di, *g, causal, deterministic=path == "det")
                    calls[path]()
                    grads[path] = g
                repeat = True  # the det path, where there is one, must repeat bit for bit
                if "det" in calls:
                    first = tuple(x.clone() for x in grads["det"])
                    calls["det"]()
                    repeat = all(torch.equal(a, b2) for a, b2 in zip(first, grads["det"]))
                    del first
                torch.cuda.synchronize()
                # SDPA's layout (B, H, N, D); the autograd graph picks the backward kernel at forward time.
                qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))  # views of BSHD storage, as bench/sdpa.py: a contiguous (B, H, N, D) dO costs SDPA flash a copy (0.19 ms per call, H200)
                for x in (qt, kt, vt):
                    x.requires_grad_(True)
                outs = {}
                for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                    with sdpa_kernel(be):
                        outs[name] = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                # Correctness on batch 0, heads 0-3, against float32 math.
                sl = (slice(0, 1), slice(0, 4))
                q32, k32, v32 = (x.detach()[sl].float().requires_grad_(True) for x in (qt, kt, vt))
                with sdpa_kernel(SDPBackend.MATH):
                    ref = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
                rq, rk, rv = torch.autograd.grad(ref, (q32, k32, v32), dot[sl].float())
                fq, fk, fv = torch.autograd.grad(outs["flash"], (qt, kt, vt), dot, retain_graph=True)
                errs = {}
                for path, (dq, dk, dv) in grads.items():
                    errs[path] = []
                    for mine, fl, r in ((dq, fq, rq), (dk, fk, rk), (dv, fv, rv)):
                        e = (mine.transpose(1, 2)[sl].float() - r).abs().max().item()
                        ef = (fl[sl].float() - r).abs().max().item()
                        nan = torch.isnan(mine).any().item()
                        errs[path].append((e, ef, nan))
                del q32, k32, v32, ref, rq, rk, rv, fq, fk, fv
                bad = any(nan or not e <= 2 * ef + 1e-3 for es in errs.values() for e, ef, nan in es) or not repeat
                fails += bad
                ts = {"flash": [], "efficient": [], **{p: [] for p in paths}}
                for _ in range(4):
                    for name in ("flash", "efficient"):
                        out = outs[name]
                        ts[name] += timed(lambda: torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True), 5)
                    for path in paths:
                        ts[path] += timed(calls[path], 5)
                flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)
                tf = {k2: flops / sorted(t)[len(t) // 2] / 1e9 for k2, t in ts.items()}
                es = " ".join(f"{e:.1e}({ef:.1e})" + ("NaN" if nan else "") for e, ef, nan in errs["ours"])
                es += ", det " + " ".join(f"{e:.1e}" + ("NaN" if nan else "") for e, ef, nan in errs.get("det", []))
                path = "/".join(("large" if c.large else "single") if c.single else "three" for c in calls.values())
                det, det_ratio = (f"{tf['det']:7.1f}", f"{tf['det'] / tf['flash']:9.2f}") if "det" in tf else (f"{'-':>7}", f"{'-':>9}")
                print(f"{d:>4} {int(causal):>6} {n:>6} | {tf['flash']:7.1f} {tf['efficient']:7.1f} {tf['ours']:7.1f} {det}"
                      f"             | {tf['ours'] / tf['flash']:10.2f} {det_ratio} {tf['ours'] / tf['efficient']:8.2f}"
                      f" | {path:>12} | {es}" + ("" if repeat else "  DET-NOT-REPEATED") + ("  FAIL" if bad else ""), flush=True)
                del q, k, v, do, o, lse, di, grads, qt, kt, vt, dot, outs, calls
                torch.cuda.empty_cache()
    print("all shapes within 2x flash's error" if not fails else f"{fails} shapes FAILED")


def main():
    args = sys.argv[1:]
    ptx75, bwd = "--ptx75" in args, "--bwd" in args
    ns = [int(a) for a in args if a.isdigit()] or ([2048, 8192] if bwd else [512, 1024, 2048, 4096, 8192, 16384])
    ds = [int(a[1:]) for a in args if a[:1] == "d" and a[1:].isdigit()] or [64, 128]  # head dims, e.g. d128
    paths = images(("fwd", "bwd"), ptx75)
    m = Module(*paths)
    if "--smem99" in args:  # choose the kernels an sm_86/89 runs (99 KiB opt-in): no _large set
        m.smem_optin = 99 * 1024
    pb = os.environ.get("FA2_FATBIN_B")  # forward only: a candidate build's fatbin, timed beside ours
    mb = Module(pb) if pb and not bwd else None
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__, "ours:", " ".join(paths), "B:", pb if mb else "-", flush=True)
    if bwd:
        backward(m, 75 if ptx75 else 80, ns, ds)
    else:
        forward(m, 75 if ptx75 else 80, ns, ds, mb)


if __name__ == "__main__":
    main()
