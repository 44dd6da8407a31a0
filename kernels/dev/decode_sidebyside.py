"""KV-cache decode, side by side in ONE process on one GPU: PyTorch SDPA (flash,
efficient, cuDNN) and GoFlash's shipped decode kernels (internal/kernels/fa2.fatbin,
launched through the driver API with ctypes as the Go code launches them),
interleaved call by call.

Decode is memory bound: the figure of merit is the bytes of K and V read
(B * Ncache * Hkv * D * 2 tensors * 2 bytes) over the median time, against the
H200's ~4.8 TB/s. Each timed call starts with a cold L2 (a 512 MiB buffer is
written between calls, outside the timed span), as in a model where every layer
reads its own cache; otherwise a small cache would be served from the 50+ MiB L2.

SDPA gets q (B, Hq, Nq, D) and the cache (B, Hkv, N, D) with enable_gqa=True
(no copies); a backend that refuses GQA is timed on K/V repeated to Hq heads
(repeat_interleave, made before timing; it then reads Hq/Hkv times the bytes) and
marked "rep". Nq = 1, so causal (bottom-right) equals no mask: SDPA runs
is_causal=False. Before timing, each shape's O is checked against float32 math.

Usage: python3 kernels/dev/decode_sidebyside.py [--ptx75] [--splits N] [--sanitize] [--tiles CUBIN]
  --ptx75: the Turing kernels from internal/kernels/fa2_sm75.ptx (driver JIT);
  --splits N: force N KV splits (default: the rule of flashattn/gpu_decode.go);
  --sanitize: one small contiguous and one paged call of each head dim, no
              timing (for compute-sanitizer);
  --tiles CUBIN: B = 1, 32/8 heads, D 128: the shipped kernel beside the
              candidate tiles of kernels/dev/decode_tiles.cu (built into CUBIN),
              each split to fill the CTAs that fit an SM, and SDPA flash/cuDNN.
  --profile CUBIN: D 128, B 1 and 4: where the shipped call's time goes (the
              torch profiler's kernel records: the decode kernel, the combine,
              the gap between them), beside kernels/dev/decode_fused.cu (built
              into CUBIN: the merge in the last CTA, one launch), SDPA flash and
              cuDNN, and the launch floor (an empty kernel, one and two launches);
              then decode_fused.cu's fused2 and fused3 (the parallel merges) at
              the shipped split count s, and fused3 at s/2;
  --sanitize-fused CUBIN: one small call of each decode_fused.cu kernel beside the
              shipped two-kernel call (for compute-sanitizer).
"""
import ctypes
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, "kernels/dev")
sys.path.insert(0, "bench")
from sidebyside import Module, ck, cu  # noqa: E402  (the loader and the driver)
from sdpa import sdpa_backends  # noqa: E402  (our backend names -> SDPBackend, one map)


class DecodeParams(ctypes.Structure):  # kernels/params.cuh
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "lse", "o_part", "lse_part", "seqlens", "table")] + \
               [(n, ctypes.c_int64) for n in ("qb", "qs", "qh", "kb", "ks", "kh", "vb", "vs", "vh", "ob", "os", "oh")] + \
               [(n, ctypes.c_int32) for n in ("table_stride", "page", "b", "nq", "hq", "hkv", "d", "splits", "causal")] + \
               [("scale_log2", ctypes.c_float), ("scale", ctypes.c_float)]


assert ctypes.sizeof(DecodeParams) == 216


def splits_rule(ctas, sms, max_len, bc):
    """flashattn/gpu_decode.go decodeSplits, the same rule."""
    return max(1, min((2 * sms) // ctas, max_len // (2 * bc), 128))


def decode_call(m, arch, q, k, v, o, lse, seqlens, table=None, page=0, causal=False, splits=None):
    """q, o (B, Nq, Hq, D); k, v the cache (B, N, Hkv, D) or paged (blocks, page, Hkv, D), fp16
    contiguous; lse (B, Hq, Nq) fp32; seqlens int32 (B); table int32 (B, T) or None."""
    b, nq, hq, d = q.shape
    hkv = k.shape[2]
    f, br, bc, warps, smem = m.fn(f"fa2_decode_sm{arch}_d{d}")
    cf, _, _, cwarps, _ = m.fn(f"fa2_decode_combine_sm{arch}_d{d}")
    tiles = -(-nq * (hq // hkv) // br)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    s = splits or splits_rule(b * hkv * tiles, sms, int(seqlens.max().item()), bc)
    rows = b * hq * nq
    opart = torch.full((max(s, 2) * rows * d,), float("nan"), device="cuda") if s > 1 else None
    lpart = torch.full((max(s, 2) * rows,), float("nan"), device="cuda") if s > 1 else None
    p = DecodeParams(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                     opart.data_ptr() if s > 1 else 0, lpart.data_ptr() if s > 1 else 0, seqlens.data_ptr(),
                     table.data_ptr() if table is not None else 0,
                     *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                     table.shape[1] if table is not None else 0, page, b, nq, hq, hkv, d, s, int(causal),
                     1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d))
    args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    cgrid = -(-rows * (d // 8) // (cwarps * 32))

    def call():
        ck(cu.cuLaunchKernel(f, s, b * hkv, tiles, warps * 32, 1, 1, smem, stream, args, None), "decode")
        if s > 1:
            ck(cu.cuLaunchKernel(cf, cgrid, 1, 1, cwarps * 32, 1, 1, 0, stream, args, None), "combine")
    call.keep = (p, args, opart, lpart)
    call.splits = s
    return call


FLUSH = None


def timed(fn, reps):
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        FLUSH.zero_()  # evicts the cache from L2, outside the timed span
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)  # GPU busy while the host enqueues: host overhead stays out of the time
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return ts


def paged_copy(k, v, page, gen):
    """The cache in blocks of `page` rows, in a shuffled order; returns k, v, table."""
    b, n, h, d = k.shape
    per = -(-n // page)
    perm = torch.randperm(b * per, generator=gen).to("cuda")
    kp = torch.zeros(b * per, page, h, d, device="cuda", dtype=k.dtype)
    vp = torch.zeros_like(kp)
    pad = per * page - n
    kr = F.pad(k, (0, 0, 0, 0, 0, pad)).reshape(b * per, page, h, d)
    vr = F.pad(v, (0, 0, 0, 0, 0, pad)).reshape(b * per, page, h, d)
    kp[perm] = kr
    vp[perm] = vr
    return kp, vp, perm.reshape(b, per).to(torch.int32).contiguous()


def sdpa_calls(qt, kt, vt, hq, hkv):
    """name -> (call, note): SDPA's backends on q (B, Hq, Nq, D), k, v (B, Hkv, N, D)."""
    out = {}
    rep = None
    backends = sdpa_backends()
    for name in ("flash", "efficient", "cudnn"):
        be = backends[name]
        def gqa(be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
        try:
            gqa()
            out[name] = (gqa, "gqa")
            continue
        except RuntimeError:
            pass
        if rep is None:
            rep = (kt.repeat_interleave(hq // hkv, dim=1), vt.repeat_interleave(hq // hkv, dim=1))

        def reps(be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(qt, rep[0], rep[1])
        try:
            reps()
            out[name] = (reps, "rep")
        except RuntimeError as e:
            out[name] = (None, str(e).split("\n")[0][:40])
    return out


def bench(m, arch, splits):
    peak = 4.8e12
    print(f"{'B':>2} {'Hq':>3} {'Hkv':>3} {'D':>3} {'Ncache':>7} {'layout':>8} | KV MB | "
          f"{'flash':>9} {'effic.':>9} {'cudnn':>9} {'ours':>7} us | ours TB/s (of 4.8) | vs best SDPA | splits | max|err| (flash's)")
    gen = torch.Generator().manual_seed(1)
    fails = 0
    every = (1024, 4096, 16384, 32768, 65536, 131072)
    for (b, hq, hkv, d), lengths in (((1, 32, 8, 128), every), ((4, 32, 8, 128), (4096, 32768, 131072)),
                                     ((1, 64, 8, 128), (32768, 131072)), ((1, 32, 8, 64), (32768, 131072))):
        for n in lengths:
            torch.manual_seed(n + b)
            q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
            k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            seqlens = torch.full((b,), n, dtype=torch.int32, device="cuda")
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # strided views, no copies
            kt, vt = kt.contiguous(), vt.contiguous()  # SDPA's own layout for the cache (B, Hkv, N, D)
            with sdpa_kernel(SDPBackend.MATH):
                ref = F.scaled_dot_product_attention(qt[:1].float(), kt[:1].float(), vt[:1].float(), enable_gqa=True)
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            ferr = (sd["flash"][0]()[:1].float() - ref).abs().max().item() if sd["flash"][0] else float("nan")
            kv_bytes = 2 * b * n * hkv * d * 2
            layouts = [("contig", k, v, None, 0)]
            if b == 1 and hq == 32 and d == 128 and n in (32768, 131072):
                for page in (16, 256):
                    kp, vp, tab = paged_copy(k, v, page, gen)
                    layouts.append((f"paged{page}", kp, vp, tab, page))
            for lname, kk, vv, tab, page in layouts:
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, 1), float("nan"), device="cuda")
                ours = decode_call(m, arch, q, kk, vv, o, lse, seqlens, tab, page, False, splits)
                ours()
                torch.cuda.synchronize()
                err = (o[:1].transpose(1, 2).float() - ref).abs().max().item()
                bad = torch.isnan(o).any().item() or not err <= 2 * ferr + 1e-3
                fails += bad
                ts = {name: [] for name in sd}
                ts["ours"] = []
                for _ in range(4):  # interleaved: 4 rounds of 5 timed calls each
                    for name, (fn, _) in sd.items():
                        if fn and lname == "contig":
                            ts[name] += timed(fn, 5)
                    ts["ours"] += timed(ours, 5)
                med = {name: sorted(t)[len(t) // 2] * 1e3 if t else float("nan") for name, t in ts.items()}
                best = min((med[x] for x in sd if sd[x][0] and lname == "contig"), default=float("nan"))
                col = lambda x: (f"{med[x]:7.1f}" + ("r" if sd[x][1] == "rep" else " ") + " ") if sd[x][0] and lname == "contig" else f"{'-':>9}"
                tbps = kv_bytes / (med["ours"] * 1e-6) / 1e12
                print(f"{b:>2} {hq:>3} {hkv:>3} {d:>3} {n:>7} {lname:>8} | {kv_bytes / 1e6:5.0f} | {col('flash')}{col('efficient')}{col('cudnn')}"
                      f"{med['ours']:7.1f}    | {tbps:5.2f} ({tbps * 1e12 / peak:4.0%})      | "
                      f"{best / med['ours']:8.2f}x    | {ours.splits:>6} | {err:.1e} ({ferr:.1e})" + ("  FAIL" if bad else ""), flush=True)
                del o, lse, ours
            del q, k, v, kt, vt, qt, sd, ref, layouts
            torch.cuda.empty_cache()
    print("all shapes within 2x flash's error, no NaN" if not fails else f"{fails} shapes FAILED")


def sanitize(m, arch):
    """Small calls for compute-sanitizer: every head dim, contiguous and paged, 1 and 3 splits."""
    gen = torch.Generator().manual_seed(2)
    dims = (32, 64, 96, 128) + ((256,) if arch == 80 else ())
    for d in dims:
        for splits in (1, 3):
            b, nq, hq, hkv, n = 3, 2, 8, 2, 300
            q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
            k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            seqlens = torch.tensor([n, 1, 130], dtype=torch.int32, device="cuda")
            kp, vp, tab = paged_copy(k, v, 48, gen)
            for kk, vv, t, page in ((k, v, None, 0), (kp, vp, tab, 48)):
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, nq), float("nan"), device="cuda")
                decode_call(m, arch, q, kk, vv, o, lse, seqlens, t, page, True, splits)()
                torch.cuda.synchronize()
                assert not torch.isnan(o).any().item(), f"D{d} splits {splits}: NaN left in O"
    print("sanitize calls done", flush=True)


def occupancy(m, sym):
    """CTAs of sym resident per SM (the driver's answer for its threads and shared memory)."""
    f, _, _, warps, smem = m.fn(sym)
    n = ctypes.c_int()
    ck(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), f, warps * 32, ctypes.c_size_t(smem)), sym)
    return n.value


def tiles_bench(m, cubin):
    """The shipped D128 decode kernel and decode_tiles.cu's candidates, B 1, contiguous and paged."""
    import re
    dev = Module(cubin)
    cands = re.findall(r"^FA2_DEV_DECODE\((\d+), (\d+), (\d+)\)", open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "decode_tiles.cu")).read(), re.M)
    for bc, w, st in ((int(x) for x in c) for c in cands):
        kv, merge = st * 2 * bc * 128 * 2, w * 16 * (128 + 4) * 4 + w * 16 * 4  # traits.cuh's DecodeTile
        dev.tiles[f"dev_decode_bc{bc}_w{w}_s{st}"] = (16, bc, w, max(kv, merge))
    dev.tiles["dev_decode_combine_d128"] = m.tiles["fa2_decode_combine_sm80_d128"]  # the same code
    kerns = [("shipped", m, "fa2_decode_sm80_d128", "fa2_decode_combine_sm80_d128")]
    kerns += [(sym[len("dev_decode_"):], dev, sym, "dev_decode_combine_d128") for sym in dev.tiles if sym.startswith("dev_decode_bc")]
    occ = {name: occupancy(mm, sym) for name, mm, sym, _ in kerns}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("CTAs per SM:", occ, flush=True)
    print(f"{'Ncache':>7} {'layout':>8} {'kernel':>14} | {'us':>7} | TB/s (of 4.8) | splits | max|err| (flash's)")
    gen = torch.Generator().manual_seed(1)
    b, hq, hkv, d = 1, 32, 8, 128
    for n in (4096, 16384, 32768, 65536, 131072):
        torch.manual_seed(n)
        q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
        k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
        v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
        seqlens = torch.full((b,), n, dtype=torch.int32, device="cuda")
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(), enable_gqa=True)
        sd = sdpa_calls(qt, kt, vt, hq, hkv)
        ferr = (sd["flash"][0]().float() - ref).abs().max().item()
        layouts = [("contig", k, v, None, 0)]
        if n >= 32768:
            for page in (16, 256):
                layouts.append((f"paged{page}",) + paged_copy(k, v, page, gen) + (page,))
        calls = {("contig", nm): (sd[nm][0], None) for nm in ("flash", "cudnn") if sd[nm][0]}
        for lname, kk, vv, tab, page in layouts:
            for name, mm, sym, comb in kerns:
                _, _, bc, _, _ = mm.fn(sym)
                s = max(1, min(occ[name] * sms // (b * hkv), n // (2 * bc), 128))
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, 1), float("nan"), device="cuda")
                fn = mm.fn
                mm.fn = lambda x, fn=fn, sym=sym, comb=comb: fn(comb if "combine" in x else sym)
                try:
                    c = decode_call(mm, 80, q, kk, vv, o, lse, seqlens, tab, page, False, s)
                finally:
                    del mm.fn
                c()
                torch.cuda.synchronize()
                err = (o.transpose(1, 2).float() - ref).abs().max().item()
                calls[(lname, name)] = (c, (err, torch.isnan(o).any().item() or not err <= 2 * ferr + 1e-3))
        ts = {key: [] for key in calls}
        for _ in range(4):  # interleaved: 4 rounds of 5 timed calls each
            for key, (fn, _) in calls.items():
                ts[key] += timed(fn, 5)
        kv_bytes = 2 * b * n * hkv * d * 2
        for key, t in ts.items():
            us = sorted(t)[len(t) // 2] * 1e3
            fn, chk = calls[key]
            tb = kv_bytes / us / 1e6
            tail = f"{fn.splits:>6} | {chk[0]:.1e} ({ferr:.1e})" + ("  FAIL" if chk[1] else "") if chk else f"{'':>6} |"
            print(f"{n:>7} {key[0]:>8} {key[1]:>14} | {us:7.1f} | {tb:5.2f} ({tb / 4.8:4.0%})   | {tail}", flush=True)
        del calls, ts, q, k, v, kt, vt, sd, layouts
        torch.cuda.empty_cache()


class FusedParams(ctypes.Structure):  # kernels/dev/decode_fused.cu
    _fields_ = [("p", DecodeParams), ("counters", ctypes.c_uint64)]


def fused_call(dev, shipped, q, k, v, o, lse, seqlens, splits, sym="dev_decode_fused_d128"):
    """decode_fused.cu's one-launch decode (kernel sym) with the shipped call's parameters, split splits ways."""
    b, nq, hq, d = q.shape
    hkv = k.shape[2]
    f, br, _, warps, smem = dev.fn(sym)
    tiles = -(-nq * (hq // hkv) // br)
    rows = b * hq * nq
    opart = torch.full((max(splits, 2) * rows * d,), float("nan"), device="cuda")
    lpart = torch.full((max(splits, 2) * rows,), float("nan"), device="cuda")
    counters = torch.zeros(b * hkv * tiles, dtype=torch.int32, device="cuda")
    sp = shipped.keep[0]
    p = DecodeParams.from_buffer_copy(sp)
    p.o, p.lse, p.o_part, p.lse_part, p.splits = o.data_ptr(), lse.data_ptr(), opart.data_ptr(), lpart.data_ptr(), splits
    fp = FusedParams(p, counters.data_ptr())
    args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(fp), ctypes.c_void_p))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def call():
        ck(cu.cuLaunchKernel(f, splits, b * hkv, tiles, warps * 32, 1, 1, smem, stream, args, None), "fused")
    call.keep = (fp, args, opart, lpart)
    call.counters = counters
    return call


def kernel_records(fn, reps):
    """The CUDA kernels of reps calls of fn (each after an L2 flush), from the torch profiler's
    trace: [(name, start us, duration us)] in start order."""
    import json
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            FLUSH.zero_()
            torch.cuda._sleep(100_000)
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as tf:
        prof.export_chrome_trace(tf.name)
        ev = json.load(open(tf.name))["traceEvents"]
    ks = [(e["name"], float(e["ts"]), float(e["dur"])) for e in ev if e.get("cat") == "kernel"]
    return sorted(ks, key=lambda x: x[1])


FUSED_VARIANTS = {"fused2": "dev_decode_fused2_d128", "fused3": "dev_decode_fused3_d128"}


def sanitize_fused(m, cubin):
    """One small call of each decode_fused.cu kernel (for compute-sanitizer): B 2, Nq 2 (8 packed
    rows), a 4k cache with unequal lengths, 16 splits; O checked against float32 math."""
    dev = Module(cubin)
    syms = ["dev_decode_fused_d128"] + list(FUSED_VARIANTS.values())
    for sym in syms:
        dev.tiles[sym] = m.tiles["fa2_decode_sm80_d128"]
    b, nq, hq, hkv, d, n = 2, 2, 32, 8, 128, 4096
    torch.manual_seed(0)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    seqlens = torch.tensor([n, n - 1000], dtype=torch.int32, device="cuda")
    o1, l1 = torch.zeros_like(q), torch.zeros(b, hq, nq, device="cuda")
    two = decode_call(m, 80, q, k, v, o1, l1, seqlens, splits=16)
    two()
    fails = 0
    for sym in syms:
        o2, l2 = torch.full_like(q, float("nan")), torch.full((b, hq, nq), float("nan"), device="cuda")
        fn = fused_call(dev, two, q, k, v, o2, l2, seqlens, 16, sym)
        fn()
        torch.cuda.synchronize()
        err = (o2.float() - o1.float()).abs().max().item()
        bad = not err <= 1e-3 or not torch.allclose(l1, l2, rtol=1e-5, atol=1e-5) or fn.counters.abs().sum().item() != 0
        fails += bad
        print(f"{sym}: max|O - two-kernel O| {err:.1e}" + ("  FAIL" if bad else ""), flush=True)
    print("sanitize-fused: all match the shipped two-kernel call" if not fails else f"{fails} FAILED")


def profile_bench(m, cubin):
    """Where the shipped decode call's time goes, and the fused merge beside it."""
    global FLUSH
    dev = Module(cubin)
    dev.tiles["dev_decode_fused_d128"] = m.tiles["fa2_decode_sm80_d128"]  # the shipped tile, one launch
    for sym in FUSED_VARIANTS.values():  # the same tile, the merge parallelised
        dev.tiles[sym] = m.tiles["fa2_decode_sm80_d128"]
    dev.tiles["dev_empty"] = (0, 0, 1, 0)
    if FLUSH is None:
        FLUSH = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    fe = dev.fn("dev_empty")[0]
    empty1 = lambda: ck(cu.cuLaunchKernel(fe, 1, 1, 1, 32, 1, 1, 0, stream, None, None), "empty")
    def empty2():
        empty1()
        empty1()
    floor = {name: sorted(timed(fn, 40))[20] * 1e3 for name, fn in (("1 launch", empty1), ("2 launches", empty2))}
    print("launch floor (empty kernel, CUDA events, same method as below): " +
          ", ".join(f"{k} {v:.2f} us" for k, v in floor.items()), flush=True)
    print(f"{'B':>2} {'Ncache':>7} | {'splits':>6} | decode us | combine us | gap us | {'two-kernel':>10} {'fused':>7} {'flash':>7} {'cudnn':>7} us | "
          f"TB/s two / fused (of 4.8) | fused vs two | fused vs best SDPA | max|err| two, fused (flash's)")
    print("  then per shape: fused2/fused3 (the parallel merges) at the shipped split count s (and fused3 at s/2): us, TB/s (of 4.8), vs best SDPA, max|err|")
    fails = 0
    for b, lengths in ((1, (1024, 4096, 16384, 32768, 65536, 131072)), (4, (32768, 131072))):
        hq, hkv, d = 32, 8, 128
        for n in lengths:
            torch.manual_seed(n + b)
            q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
            k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
            seqlens = torch.full((b,), n, dtype=torch.int32, device="cuda")
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            with sdpa_kernel(SDPBackend.MATH):
                ref = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(), enable_gqa=True)
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            ferr = (sd["flash"][0]().float() - ref).abs().max().item()
            o1, o2 = torch.full_like(q, float("nan")), torch.full_like(q, float("nan"))
            l1, l2 = (torch.full((b, hq, 1), float("nan"), device="cuda") for _ in range(2))
            two = decode_call(m, 80, q, k, v, o1, l1, seqlens)
            fused = fused_call(dev, two, q, k, v, o2, l2, seqlens, two.splits)
            two()
            fused()
            fused()  # twice: the counters reset themselves
            f2 = {}
            for name, sp in (("fused2", two.splits), ("fused3", two.splits), ("fused3", max(2, two.splits // 2))):
                o3, l3 = torch.full_like(q, float("nan")), torch.full((b, hq, 1), float("nan"), device="cuda")
                fn = fused_call(dev, two, q, k, v, o3, l3, seqlens, sp, FUSED_VARIANTS[name])
                fn()
                fn()
                f2[f"{name}@{sp}"] = (fn, o3, l3)
            torch.cuda.synchronize()
            e1 = (o1.transpose(1, 2).float() - ref).abs().max().item()
            e2 = (o2.transpose(1, 2).float() - ref).abs().max().item()
            lse_ok = torch.allclose(l1, l2, rtol=1e-5, atol=1e-5)
            bad = (torch.isnan(o2).any().item() or not e2 <= 2 * ferr + 1e-3 or not lse_ok or
                   fused.counters.abs().sum().item() != 0 or not e1 <= 2 * ferr + 1e-3)
            fails += bad
            recs = kernel_records(two, 10)
            dec = [r for r in recs if r[0].startswith("fa2_decode_sm")]
            comb = [r for r in recs if r[0].startswith("fa2_decode_combine")]
            dus = sorted(r[2] for r in dec)[len(dec) // 2] if dec else float("nan")
            cus = sorted(r[2] for r in comb)[len(comb) // 2] if comb else float("nan")
            gaps = sorted(c[1] - (dd[1] + dd[2]) for dd, c in zip(dec, comb))
            gap = gaps[len(gaps) // 2] if gaps else float("nan")
            f2err = {}
            for sp, (fn, o3, l3) in f2.items():
                e3 = (o3.transpose(1, 2).float() - ref).abs().max().item()
                f2err[sp] = e3
                bad3 = (torch.isnan(o3).any().item() or not e3 <= 2 * ferr + 1e-3 or
                        not torch.allclose(l1, l3, rtol=1e-5, atol=1e-5) or fn.counters.abs().sum().item() != 0)
                fails += bad3
                if bad3:
                    print(f"  {sp} splits FAILED: max|err| {e3:.1e}", flush=True)
            calls = {"two": two, "fused": fused, "flash": sd["flash"][0], "cudnn": sd["cudnn"][0]}
            calls.update({sp: fn for sp, (fn, _, _) in f2.items()})
            ts = {key: [] for key in calls}
            for _ in range(4):  # interleaved: 4 rounds of 5 timed calls each
                for key, fn in calls.items():
                    if fn:
                        ts[key] += timed(fn, 5)
            med = {key: sorted(t)[len(t) // 2] * 1e3 if t else float("nan") for key, t in ts.items()}
            kv = 2 * b * n * hkv * d * 2
            tb = lambda us: kv / us / 1e6
            best = min(med["flash"], med["cudnn"])
            print(f"{b:>2} {n:>7} | {two.splits:>6} | {dus:9.1f} | {cus:10.1f} | {gap:6.1f} | {med['two']:10.1f} {med['fused']:7.1f} "
                  f"{med['flash']:7.1f} {med['cudnn']:7.1f}    | {tb(med['two']):4.2f} ({tb(med['two']) / 4.8:4.0%}) / {tb(med['fused']):4.2f} "
                  f"({tb(med['fused']) / 4.8:4.0%}) | {med['two'] / med['fused']:11.2f}x | {best / med['fused']:17.2f}x | "
                  f"{e1:.1e}, {e2:.1e} ({ferr:.1e})" + ("  FAIL" if bad else ""), flush=True)
            print("   " + " | ".join(f"{sp:>9}: {med[sp]:6.1f} us {tb(med[sp]):4.2f} "
                                     f"({tb(med[sp]) / 4.8:4.0%}) {best / med[sp]:5.2f}x {f2err[sp]:.1e}"
                                     for sp in f2), flush=True)
            del q, k, v, kt, vt, qt, sd, ref, two, fused, calls, f2
            torch.cuda.empty_cache()
    print("all shapes within 2x flash's error, LSEs equal, counters reset, no NaN" if not fails else f"{fails} shapes FAILED")


def main():
    args = sys.argv[1:]
    ptx75 = "--ptx75" in args
    splits = int(args[args.index("--splits") + 1]) if "--splits" in args else None
    path = "internal/kernels/fa2_sm75.ptx" if ptx75 else "internal/kernels/fa2.fatbin"
    m = Module(path)
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__, "ours:", path, flush=True)
    if "--sanitize" in args:
        sanitize(m, 75 if ptx75 else 80)
    elif "--sanitize-fused" in args:
        sanitize_fused(m, args[args.index("--sanitize-fused") + 1])
    elif "--profile" in args:
        profile_bench(m, args[args.index("--profile") + 1])
    elif "--tiles" in args:
        tiles_bench(m, args[args.index("--tiles") + 1])
    else:
        bench(m, 75 if ptx75 else 80, splits)


if __name__ == "__main__":
    main()
