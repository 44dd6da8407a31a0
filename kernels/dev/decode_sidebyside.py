"""KV-cache decode, side by side in ONE process on one GPU: PyTorch SDPA (flash,
efficient, cuDNN) and GoFlash's shipped decode kernels (internal/kernels/fa2_decode.fatbin,
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

Each of our calls is one launch (the last CTAs of each split group to finish
merge the splits); every call is made twice before its check, and the split
counters must be back at zero after it.

Usage: python3 kernels/dev/decode_sidebyside.py [--ptx75] [--splits N] [--sanitize | --sweep | --mods]
  --ptx75: the Turing kernels from internal/kernels/fa2_decode_ptx75.fatbin (driver JIT);
  --splits N: force N KV splits (default: the rule of flashattn/gpu_decode.go);
  --sanitize: one small contiguous and one paged call of each head dim, no
              timing (for compute-sanitizer), with and without the modifiers;
  --sweep: ours at forced split counts beside cuDNN (the split rule's data);
  --sweep-levels: split counts on short caches with few kv heads (MQA-like shapes, 2k-16k);
  --sweep-paged: the same on paged caches (blocks of 16 and 256) beside the contiguous one;
  --mods: window, softcap and ALiBi timed beside the plain call, checked;
  --module PATH: load the kernels from PATH (a dev cubin) instead of the fatbin;
  --tile-smem N: that module's decode tile takes N bytes of dynamic shared memory (not resources.md's);
  --rows N: that module's decode tile packs N query rows per CTA (not resources.md's);
  --ab PATH[,PATH...]: these kernels against each PATH's (dev cubins of the same symbols), interleaved;
     --hnd: each also on the cache laid out as SDPA gets it, (B, Hkv, N, D).
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
from sidebyside import Module, ck, cu, images  # noqa: E402  (the loader and the driver)
from sdpa import sdpa_backends  # noqa: E402  (our backend names -> SDPBackend, one map)


class DecodeParams(ctypes.Structure):  # kernels/params.cuh
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "lse", "o_part", "lse_part", "seqlens", "table")] + \
               [(n, ctypes.c_int64) for n in ("qb", "qs", "qh", "kb", "ks", "kh", "vb", "vs", "vh", "ob", "os", "oh")] + \
               [(n, ctypes.c_int32) for n in ("table_stride", "page", "b", "nq", "hq", "hkv", "d", "splits",
                                              "window_left", "window_right")] + \
               [("scale_log2", ctypes.c_float), ("scale", ctypes.c_float), ("split_count", ctypes.c_uint64),
                ("alibi", ctypes.c_uint64), ("softcap", ctypes.c_float), ("uniform_len", ctypes.c_int32),
                ("merge_ctas", ctypes.c_int32)]


assert ctypes.sizeof(DecodeParams) == 248


MERGE_LOADS = 8  # decode.cuh's kMergeLoads


def merge_ctas(groups, splits, rows, d, threads, sms):
    """flashattn/gpu_decode.go decodeMergeCTAs, the same rule."""
    if splits <= 1:
        return 1
    items = rows * d // 8
    m = -(-items * splits // (threads * MERGE_LOADS))
    return max(1, min(m, splits, items, 1 + sms // (4 * groups)))


def splits_rule(ctas, sms, per_sm, span, bc, paged):
    """flashattn/gpu_decode.go decodeSplits, the same rule."""
    min_split_blocks, paged_two_per_sm_blocks = 1 if bc >= 128 else 2, 6
    blocks = -(-span // bc)
    s = sms // ctas
    s2 = per_sm * sms // ctas
    if paged and per_sm > 1 and s2 > max(s, 1) and blocks >= paged_two_per_sm_blocks * s2:
        s = s2
    return max(1, min(s, blocks // min_split_blocks, 256))  # maxDecodeSplits


def decode_call(m, arch, q, k, v, o, lse, seqlens, table=None, page=0, causal=False, splits=None,
                window=(-1, -1), softcap=0.0, slopes=None):
    """q, o (B, Nq, Hq, D); k, v the cache (B, N, Hkv, D) or paged (blocks, page, Hkv, D), fp16
    contiguous; lse (B, Hq, Nq) fp32; seqlens int32 (B); table int32 (B, T) or None; window
    (left, right), -1 open, causal sets right 0; slopes fp32 (Hq) ALiBi or None."""
    b, nq, hq, d = q.shape
    hkv = k.shape[2]
    f, br, bc, warps, smem = m.fn(f"fa2_decode_sm{arch}_d{d}")
    if getattr(m, "tile_smem", 0):  # a dev module whose tile takes other shared memory (--tile-smem)
        smem = m.tile_smem
        ck(cu.cuFuncSetAttribute(f, 8, smem), "max dynamic smem")
    warps = getattr(m, "tile_warps", 0) or warps  # a dev module whose tile runs other warps
    br = getattr(m, "tile_rows", 0) or br  # a dev module whose tile packs other rows (--rows)
    tiles = -(-nq * (hq // hkv) // br)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    left, right = window[0], 0 if causal else window[1]
    span = int(seqlens.max().item()) if left < 0 else min(int(seqlens.max().item()), left + nq)  # decodeSpan
    s = splits or splits_rule(b * hkv * tiles, sms, max(1, min(2, m.smem_per_sm // smem)), span, bc, table is not None)
    rows = b * hq * nq
    opart = torch.full((max(s, 2) * rows * d,), float("nan"), device="cuda") if s > 1 else None
    lpart = torch.full((max(s, 2) * rows,), float("nan"), device="cuda") if s > 1 else None
    # zero once; the kernel resets them. Two per group; s + 1 per group also covers a dev
    # build with a merge tree (one counter per run of 16 splits and one more), e.g. an --ab baseline.
    counts = torch.zeros(b * hkv * tiles * (s + 1), dtype=torch.int32, device="cuda")
    mc = merge_ctas(b * hkv * tiles, s, min(br, nq * (hq // hkv)), d, warps * 32, sms)
    p = DecodeParams(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                     opart.data_ptr() if s > 1 else 0, lpart.data_ptr() if s > 1 else 0, seqlens.data_ptr(),
                     table.data_ptr() if table is not None else 0,
                     *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                     table.shape[1] if table is not None else 0, page, b, nq, hq, hkv, d, s, left, right,
                     1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d), counts.data_ptr(),
                     slopes.data_ptr() if slopes is not None else 0, softcap,
                     int(seqlens[0].item()) if bool((seqlens == seqlens[0]).all().item()) else -1, mc)
    args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def call():
        ck(cu.cuLaunchKernel(f, s, b * hkv, tiles, warps * 32, 1, 1, smem, stream, args, None), "decode")
    call.keep = (p, args, opart, lpart, slopes)
    call.splits = s
    call.merge_ctas = mc
    call.counts = counts
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


def decode_inputs(b, n, hq, hkv, d, seed, nq=1):
    """q (B, Nq, Hq, D), a contiguous cache k, v (B, N, Hkv, D), fp16 random, and seqlens (all N)."""
    torch.manual_seed(seed)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    return q, k, v, torch.full((b,), n, dtype=torch.int32, device="cuda")


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
                                     ((1, 64, 8, 128), (32768, 131072)), ((1, 32, 8, 64), (32768, 131072)),
                                     ((1, 8, 1, 128), (4096, 32768, 131072))):
        for n in lengths:
            q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n + b)
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
                o.fill_(float("nan"))
                ours()  # the second call's merge runs only if the first left its counters at zero
                torch.cuda.synchronize()
                err = (o[:1].transpose(1, 2).float() - ref).abs().max().item()
                bad = torch.isnan(o).any().item() or not err <= 2 * ferr + 1e-3 or ours.counts.abs().sum().item() != 0
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


def sweep(m, arch):
    """The split count: ours at several forced counts beside cuDNN, L2 flushed, B 1 and 4."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"split sweep: ours us at forced split counts (rule's marked *), cuDNN us; {sms} SMs", flush=True)
    for b, hq, hkv, d in ((1, 32, 8, 128), (4, 32, 8, 128), (1, 32, 8, 64), (1, 8, 1, 128)):
        for n in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072):
            q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n + b)
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            cud = sd["cudnn"][0]
            ref = sd["flash"][0]().transpose(1, 2).float()  # (b, 1, hq, d)
            o = torch.empty_like(q)
            lse = torch.empty((b, hq, 1), device="cuda")
            rule = decode_call(m, arch, q, k, v, o, lse, seqlens).splits
            cands = sorted({rule, 2, 4, 8, 12, 16, 24, 33, 48, 66, 96, 132, 198, 264} - {x for x in range(300) if x > max(1, n // 128)})
            calls = {c: decode_call(m, arch, q, k, v, o, lse, seqlens, splits=c) for c in cands}
            bad = []
            for c, fn in calls.items():  # each split count's O against SDPA flash's, twice (counters back at zero)
                for _ in range(2):
                    o.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    if not (o.float() - ref).abs().max().item() < 2e-3 or fn.counts.abs().sum().item() != 0:
                        bad.append(c)
            ts = {c: [] for c in cands}
            tc = []
            for _ in range(2):
                tc += timed(cud, 5) if cud else []
                for c, fn in calls.items():
                    ts[c] += timed(fn, 5)
            med = lambda t: sorted(t)[len(t) // 2] * 1e3
            best = min(cands, key=lambda c: med(ts[c]))
            kv = 4 * b * n * hkv * d
            line = " ".join(f"{c}{'*' if c == rule else ''}:{med(ts[c]):.1f}" for c in cands)
            cu_us = med(tc) if tc else float("nan")
            print(f"B{b} {hq}/{hkv} D{d} N{n:>6}: cudnn {cu_us:6.1f} | best {best:>3} {med(ts[best]):6.1f} "
                  f"({kv / med(ts[best]) / 1e6 / 4.8:4.0%}, {cu_us / med(ts[best]):.2f}x cudnn) rule {rule} "
                  f"{med(ts[rule]):6.1f} ({cu_us / med(ts[rule]):.2f}x) | {line}" + (f"  FAIL at {sorted(set(bad))}" if bad else ""), flush=True)
            del q, k, v, kt, vt, qt, calls, o, lse, sd, ref, cud
            torch.cuda.empty_cache()


def ab(m, arch, others, hnd=False):
    """Ours (m) against other builds of the same kernels (others), interleaved, L2 flushed, beside cuDNN.
    hnd: each build also reads the cache where cuDNN reads it, the (B, Hkv, N, D) copy SDPA gets (a
    strided view as ours takes it: rows D apart, heads N*D), marked X'."""
    names = "".join(f", {chr(66 + i)} = {o.path}" for i, o in enumerate(others))
    print(f"A/B: A = this build{names}; us (median of 30), X/A < 1: X faster" +
          ("; X' = X on cuDNN's (B, Hkv, N, D) cache" if hnd else ""), flush=True)
    for b, hq, hkv, d, lengths in ((1, 32, 8, 128, (1024, 2048, 4096, 8192, 32768, 131072)), (4, 32, 8, 128, (1024, 8192)),
                                   (1, 32, 8, 64, (1024, 4096, 32768, 131072)), (1, 8, 1, 128, (1024, 4096, 32768)),
                                   (1, 8, 1, 64, (4096, 32768))):
        for n in lengths:
            q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n + b)
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
            runs = [(x, chr(65 + i), k, v) for i, x in enumerate([m] + list(others))]
            if hnd:
                runs = [r for x, nm, kk, vv in runs for r in ((x, nm, kk, vv), (x, nm + "'", kt.transpose(1, 2), vt.transpose(1, 2)))]
            os_ = [torch.empty_like(q) for _ in runs]
            ls = [torch.empty((b, hq, 1), device="cuda") for _ in runs]
            fs = [decode_call(x, arch, q, kk, vv, o, l, seqlens) for (x, _, kk, vv), o, l in zip(runs, os_, ls)]
            for f in fs:
                f()
            torch.cuda.synchronize()
            same = all(torch.equal(os_[0], o) and torch.equal(ls[0], l) for o, l in zip(os_[1:], ls[1:]))
            ts, tc = [[] for _ in fs], []
            for _ in range(3):
                tc += timed(cud, 10)
                for t, f in zip(ts, fs):
                    t += timed(f, 10)
            med = lambda t: sorted(t)[len(t) // 2] * 1e3
            a = med(ts[0])
            rest = "  ".join(f"{r[1]} {med(t):6.1f} ({med(t) / a:.3f})" for r, t in zip(runs[1:], ts[1:]))
            print(f"B{b} {hq}/{hkv} D{d} N{n:>6} splits {fs[0].splits:>3} merge {fs[0].merge_ctas:>2}: A {a:6.1f}  {rest}  "
                  f"cudnn {med(tc):6.1f} (A {med(tc) / a:.2f}x)  outputs {'equal' if same else 'DIFFER'}", flush=True)
            del q, k, v, kt, vt, qt, cud, fs, os_, ls, runs
            torch.cuda.empty_cache()


def sweep_levels(m, arch):
    """Split counts 8-128 where few kv heads leave the rule above 16 on short caches (MQA 8/1 and
    16/2, B 1, 2k-16k; 32/8 beside them), L2 flushed, beside cuDNN."""
    print("split sweep: ours us at forced split counts (rule's marked *), cuDNN us", flush=True)
    for b, hq, hkv, d in ((1, 8, 1, 128), (1, 16, 2, 128), (1, 32, 8, 128)):
        for n in (2048, 3072, 4096, 5120, 6144, 7168, 8192, 12288, 16384):
            q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n + hkv)
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            cud = sd["cudnn"][0]
            ref = sd["flash"][0]().transpose(1, 2).float()
            o = torch.empty_like(q)
            lse = torch.empty((b, hq, 1), device="cuda")
            rule = decode_call(m, arch, q, k, v, o, lse, seqlens).splits
            cands = sorted({rule, 8, 16, 24, 32, 48, 64, 96, 128} - {x for x in range(300) if x > max(1, n // 128)})
            calls = {c: decode_call(m, arch, q, k, v, o, lse, seqlens, splits=c) for c in cands}
            bad = []
            for c, fn in calls.items():
                o.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if not (o.float() - ref).abs().max().item() < 2e-3 or fn.counts.abs().sum().item() != 0:
                    bad.append(c)
            ts = {c: [] for c in cands}
            tc = []
            for _ in range(3):
                tc += timed(cud, 5)
                for c, fn in calls.items():
                    ts[c] += timed(fn, 5)
            med = lambda t: sorted(t)[len(t) // 2] * 1e3
            best = min(cands, key=lambda c: med(ts[c]))
            line = " ".join(f"{c}{'*' if c == rule else ''}:{med(ts[c]):.1f}" for c in cands)
            print(f"B{b} {hq}/{hkv} D{d} N{n:>6}: cudnn {med(tc):6.1f} | best {best:>3} {med(ts[best]):6.1f} rule {rule} "
                  f"{med(ts[rule]):6.1f} | {line}" + (f"  FAIL at {bad}" if bad else ""), flush=True)
            del q, k, v, kt, vt, qt, calls, o, lse, sd, ref, cud
            torch.cuda.empty_cache()


def sweep_paged(m, arch):
    """The split count on paged caches (blocks of 16 and 256 entries) beside the contiguous one."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"paged split sweep: ours us at forced split counts (rule's marked *); {sms} SMs", flush=True)
    gen = torch.Generator().manual_seed(4)
    b, hq, hkv, d = 1, 32, 8, 128
    for n in (4096, 16384, 32768, 65536, 131072):
        q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n)
        for page in (0, 16, 256):
            kk, vv, tab = (k, v, None) if page == 0 else paged_copy(k, v, page, gen)
            o = torch.empty_like(q)
            lse = torch.empty((b, hq, 1), device="cuda")
            rule = decode_call(m, arch, q, kk, vv, o, lse, seqlens, tab, page).splits
            cands = sorted({rule, 8, 12, 16, 24, 33, 48, 66})
            calls = {c: decode_call(m, arch, q, kk, vv, o, lse, seqlens, tab, page, splits=c) for c in cands}
            ts = {c: [] for c in cands}
            for _ in range(2):
                for c, fn in calls.items():
                    ts[c] += timed(fn, 5)
            med = lambda t: sorted(t)[len(t) // 2] * 1e3
            best = min(cands, key=lambda c: med(ts[c]))
            line = " ".join(f"{c}{'*' if c == rule else ''}:{med(ts[c]):.1f}" for c in cands)
            print(f"B{b} {hq}/{hkv} D{d} N{n:>6} {'paged%d' % page if page else 'contig':>8}: best {best:>3} {med(ts[best]):6.1f} "
                  f"rule {rule} {med(ts[rule]):6.1f} | {line}", flush=True)
            del calls, o, lse
        del q, k, v
        torch.cuda.empty_cache()


def mods(m, arch):
    """Window, softcap and ALiBi on the decode kernel: time beside the plain call (B 1, 32/8, D 128 and
    64 at Nq 1, D 64 at Nq 2; L2 flushed), each checked against float32 math with the same modifiers
    (query row i sits at cache position N - Nq + i: bottom-right)."""
    b, hq, hkv = 1, 32, 8
    slopes = torch.tensor([2 ** (-8 * (h + 1) / hq) for h in range(hq)], device="cuda")
    fails = 0
    for d, nq in ((128, 1), (64, 1), (64, 2)):
        print(f"decode with modifiers (B 1, 32/8 heads, D {d}, Nq {nq}): us, x the plain call, max|err| vs float32",
              flush=True)
        for n in (4096, 32768, 131072):
            q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n, nq)
            g = hq // hkv
            kf = k.float().repeat_interleave(g, dim=2)  # (b, n, hq, d)
            vf = v.float().repeat_interleave(g, dim=2)
            sc = torch.einsum("bihd,bjhd->bhij", q.float(), kf) / math.sqrt(d)
            pos = torch.arange(n, device="cuda")
            qpos = (n - nq + torch.arange(nq, device="cuda")).view(nq, 1)  # (nq, 1)
            plain = None
            for name, win, cap, al in (("plain", (-1, -1), 0.0, None), ("window 4096", (4096, -1), 0.0, None),
                                       ("softcap 50", (-1, -1), 50.0, None), ("alibi", (-1, -1), 0.0, slopes),
                                       ("all three", (4096, -1), 50.0, slopes)):
                x = sc.clone()
                if cap:
                    x = cap * torch.tanh(x / cap)
                if al is not None:
                    x = x - al.view(1, hq, 1, 1) * (qpos - pos.view(1, n)).abs().float().view(1, 1, nq, n)
                if win[0] >= 0:
                    x = x.masked_fill((pos.view(1, n) < qpos - win[0]).view(1, 1, nq, n), float("-inf"))
                ref = torch.einsum("bhij,bjhd->bihd", torch.softmax(x, -1), vf)
                o = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, nq), float("nan"), device="cuda")
                call = decode_call(m, arch, q, k, v, o, lse, seqlens, window=win, softcap=cap, slopes=al)
                call()
                torch.cuda.synchronize()
                err = (o.float() - ref).abs().max().item()
                lref = torch.logsumexp(x, -1)  # (b, hq, nq)
                lerr = (lse - lref).abs().max().item()
                bad = not (err < 2e-3 and lerr < 1e-3) or call.counts.abs().sum().item() != 0
                fails += bad
                t = timed(call, 20)
                us = sorted(t)[len(t) // 2] * 1e3
                plain = plain or us
                print(f"N {n:>6} {name:>12}: {us:7.1f} us  {us / plain:4.2f}x  splits {call.splits:>3}  "
                      f"max|err| O {err:.1e} LSE {lerr:.1e}" + ("  FAIL" if bad else ""), flush=True)
            del q, k, v, kf, vf, sc
            torch.cuda.empty_cache()
    print("all modifier calls within tolerance" if not fails else f"{fails} modifier calls FAILED")


def sanitize(m, arch):
    """Small calls for compute-sanitizer: every head dim, contiguous and paged, 1, 3 and 40 splits
    (40: the merge shared by 2-5 CTAs per group), with and without the modifiers."""
    gen = torch.Generator().manual_seed(2)
    dims = (32, 64, 96, 128, 256)
    for d in dims:
        for splits in (1, 3, 40):
            b, nq, hq, hkv, n = 3, 3, 8, 2, 300  # 12 packed rows: two tiles of 8 (Turing D256), one of 16
            q, k, v, _ = decode_inputs(b, n, hq, hkv, d, d + splits, nq)
            seqlens = torch.tensor([n, 1, 130], dtype=torch.int32, device="cuda")
            kp, vp, tab = paged_copy(k, v, 48, gen)
            slopes = torch.rand(hq, device="cuda")
            for kk, vv, t, page in ((k, v, None, 0), (kp, vp, tab, 48)):
                for mod in ({}, {"window": (40, -1), "softcap": 20.0, "slopes": slopes}):
                    o = torch.full_like(q, float("nan"))
                    lse = torch.full((b, hq, nq), float("nan"), device="cuda")
                    decode_call(m, arch, q, kk, vv, o, lse, seqlens, t, page, True, splits, **mod)()
                    torch.cuda.synchronize()
                    assert not torch.isnan(o).any().item(), f"D{d} splits {splits} {mod}: NaN left in O"
    print("sanitize calls done", flush=True)


def main():
    args = sys.argv[1:]
    ptx75 = "--ptx75" in args
    splits = int(args[args.index("--splits") + 1]) if "--splits" in args else None
    path = images(("decode",), ptx75)[0]
    if "--module" in args:  # a dev build of the same symbols (tiles from resources.md)
        path = args[args.index("--module") + 1]
    m = Module(path)
    if "--tile-smem" in args:
        m.tile_smem = int(args[args.index("--tile-smem") + 1])
    if "--rows" in args:
        m.tile_rows = int(args[args.index("--rows") + 1])
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__, "ours:", path, flush=True)
    if "--sanitize" in args:
        sanitize(m, 75 if ptx75 else 80)
    elif "--sweep" in args:
        sweep(m, 75 if ptx75 else 80)
    elif "--sweep-levels" in args:
        sweep_levels(m, 75 if ptx75 else 80)
    elif "--sweep-paged" in args:
        sweep_paged(m, 75 if ptx75 else 80)
    elif "--mods" in args:
        mods(m, 75 if ptx75 else 80)
    elif "--ab" in args:
        others = []
        for pth in args[args.index("--ab") + 1].split(","):
            others.append(Module(pth))
            others[-1].path = pth
        ab(m, 75 if ptx75 else 80, others, "--hnd" in args)
    else:
        bench(m, 75 if ptx75 else 80, splits)


if __name__ == "__main__":
    main()
