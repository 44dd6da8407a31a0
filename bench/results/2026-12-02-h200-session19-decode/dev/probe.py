"""Session 19 dev probe: where a decode call's time goes. Thread 0 of each CTA stamps %globaltimer at
0 entry, 1 first blocks issued, 2 first block landed, 3 loop done, 4 partial rows written, 5 run's last
CTA in, 6 run merged, 7 group's last CTA in, 8 end; a fine build (mkprobe.py ... fine, call 5) also at
9 finish, 10 warps' rows in smem, 11-14 in the merge (after its first barrier, its loads, the shares'
combine, its stores), and --fine runs its four shapes. Per shape:
event time with a cold L2 ("cold"), with a cold L2 but the kernel's code warmed by a small call of
the same kernel just before ("code-warm"), with a warm L2 ("warm"), cuDNN cold; and the stamps
(median/max over CTAs, us from the first CTA's entry) of a cold call. Usage: python3 probe.py CUBIN [--fine]"""
import ctypes
import sys

import torch

sys.path.insert(0, "kernels/dev")
import decode_sidebyside as ds  # noqa: E402
from decode_sidebyside import Module, decode_call, cu, ck, timed, sdpa_calls, decode_inputs  # noqa: E402

m = Module(sys.argv[1])
dptr, size = ctypes.c_uint64(), ctypes.c_size_t()
ck(cu.cuModuleGetGlobal_v2(ctypes.byref(dptr), ctypes.byref(size), m.mod, b"_ZN3fa29fa2_probeE"), "fa2_probe")
NS = size.value // 8 // 8192  # slots per CTA: 10, or 16 in a fine build
host = (ctypes.c_uint64 * (size.value // 8))()
names = ["entry", "issued", "landed", "loop", "written", "in1", "merged1", "in2", "end", "finish", "smem", "m-sync", "m-loads", "m-parts", "m-stored"]
print("device", torch.cuda.get_device_name(), "probe build", sys.argv[1], flush=True)


def timed_pre(fn, pre, reps, flush=True):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        if flush:
            ds.FLUSH.zero_()
        if pre:
            pre()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return sorted(ts)[len(ts) // 2] * 1e3


timed(lambda: None, 1)  # allocates the flush buffer
shapes = ((1, 32, 8, 128, 1024), (1, 32, 8, 128, 4096), (1, 32, 8, 128, 32768), (1, 32, 8, 64, 1024),
          (1, 8, 1, 128, 1024), (1, 8, 1, 128, 4096), (1, 8, 1, 128, 32768))
if "--fine" in sys.argv:
    shapes = ((1, 32, 8, 128, 1024), (1, 32, 8, 64, 1024), (1, 8, 1, 128, 4096), (1, 8, 1, 128, 32768))
for b, hq, hkv, d, n in shapes:
    q, k, v, seqlens = decode_inputs(b, n, hq, hkv, d, n)
    o, lse = torch.empty_like(q), torch.empty((b, hq, 1), device="cuda")
    call = decode_call(m, 80, q, k, v, o, lse, seqlens)
    q2, k2, v2, s2 = decode_inputs(1, 256, hq, hkv, d, 1)
    o2, l2 = torch.empty_like(q2), torch.empty((1, hq, 1), device="cuda")
    small = decode_call(m, 80, q2, k2, v2, o2, l2, s2, splits=4)  # same kernel, the merge path too
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
    cold = timed_pre(call, None, 20)
    warmcode = timed_pre(call, small, 20)
    warm = timed_pre(call, None, 20, flush=False)
    cudc = timed_pre(cud, None, 20)
    cudw = timed_pre(cud, None, 20, flush=False)
    rows = []
    for rep in range(5):
        ck(cu.cuMemsetD8_v2(dptr, 0, size), "memset")
        timed(call, 1)
        torch.cuda.synchronize()
        ck(cu.cuMemcpyDtoH_v2(host, dptr, size), "dtoh")
        ctas = call.splits * b * hkv
        t = torch.tensor([host[i] for i in range(ctas * NS)], dtype=torch.float64).view(ctas, NS)
        rows.append((t - t[:, 0].min()) / 1e3)
    t = rows[len(rows) // 2]
    desc = []
    for i, nm in enumerate(names):
        col = t[:, i]
        col = col[(col >= 0) & (col < 1e6)]
        if len(col):
            desc.append(f"{nm} {col.median().item():4.1f}/{col.max().item():4.1f}")
    print(f"B{b} {hq}/{hkv} D{d} N{n:>6} splits {call.splits:>3}: cold {cold:5.1f} code-warm {warmcode:5.1f} warm {warm:5.1f} | "
          f"cudnn cold {cudc:5.1f} warm {cudw:5.1f} | " + " ".join(desc), flush=True)
    del q, k, v, o, lse, call, small, cud
    torch.cuda.empty_cache()
