"""Session 9 dev probe: where a decode call's time goes. A build of decode.cuh with %globaltimer
stamps (thread 0 of each CTA; points 0 entry, 1 first blocks issued, 2 first block landed, 3 loop
done, 4 partial rows written, 5 its run merged (run's last CTA), 6 group merged (last), 7 end)
runs on a cold L2; per shape: the call's event time and, relative to the first CTA's entry, the
median / max of each stamp over the CTAs. Usage: python3 .build/c5/probe.py CUBIN"""
import ctypes
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, cu, ck, timed, paged_copy, sdpa_calls  # noqa: E402

path = sys.argv[1]
m = Module(path)
dptr, size = ctypes.c_uint64(), ctypes.c_size_t()
ck(cu.cuModuleGetGlobal_v2(ctypes.byref(dptr), ctypes.byref(size), m.mod, b"_ZN3fa29fa2_probeE"), "fa2_probe")
n_slots = size.value // 8
host = (ctypes.c_uint64 * n_slots)()
names = ["entry", "issued", "landed", "loop", "written", "run-merged", "merged", "end"]
print("device", torch.cuda.get_device_name(), "probe build", path, flush=True)
gen = torch.Generator().manual_seed(3)
for b, hq, hkv, d, n, page, splits in ((1, 32, 8, 128, 1024, 0, None), (1, 32, 8, 128, 4096, 0, None),
                                       (1, 32, 8, 128, 32768, 0, None), (1, 32, 8, 128, 32768, 0, 33),
                                       (1, 32, 8, 128, 131072, 0, None), (1, 8, 1, 128, 4096, 0, None),
                                       (1, 8, 1, 128, 4096, 0, 16), (1, 8, 1, 128, 32768, 0, None),
                                       (1, 32, 8, 128, 32768, 16, None), (1, 32, 8, 128, 32768, 16, 33)):
    torch.manual_seed(n)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16)
    seqlens = torch.full((b,), n, dtype=torch.int32, device="cuda")
    tab = None
    if page:
        k, v, tab = paged_copy(k, v, page, gen)
    qt = q.transpose(1, 2)
    o = torch.empty_like(q)
    lse = torch.empty((b, hq, 1), device="cuda")
    call = decode_call(m, 80, q, k, v, o, lse, seqlens, tab, page, splits=splits)
    ev = timed(call, 20)
    ev = sorted(ev)[len(ev) // 2] * 1e3
    rows = []
    for rep in range(5):
        ck(cu.cuMemsetD8_v2(dptr, 0, size), "memset")
        timed(call, 1)  # one call on a cold L2 (timed flushes it first)
        torch.cuda.synchronize()
        ck(cu.cuMemcpyDtoH_v2(host, dptr, size), "dtoh")
        ctas = call.splits * b * hkv
        t = torch.tensor([host[i] for i in range(ctas * 8)], dtype=torch.float64).view(ctas, 8)
        t0 = t[:, 0].min()
        rows.append(((t - t0) / 1e3, t[:, 0].max() - t0))
    t, _ = rows[len(rows) // 2]
    desc = []
    for i, nm in enumerate(names):
        col = t[:, i][t[:, i] > -1e6]  # stamps left 0 (not reached) are far below t0
        col = col[col >= 0]
        if len(col):
            desc.append(f"{nm} {col.median().item():5.1f}/{col.max().item():5.1f}")
    print(f"B{b} {hq}/{hkv} D{d} N{n:>6} {'paged%d' % page if page else 'contig':>8} splits {call.splits:>3} "
          f"({call.splits * b * hkv} CTAs) event {ev:6.1f} us | med/max us from the first entry: " + "  ".join(desc), flush=True)
    del q, k, v, o, lse, call
    torch.cuda.empty_cache()
