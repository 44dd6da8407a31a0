"""Session 20 dev: how close can any kernel come to 4.8 TB/s on a B 1 decode call's bytes? The
bare-read kernels of readfloor.cu (grid x threads x loads in flight swept, the best kept) beside the
shipped decode call and cuDNN on the same shapes, each timed as decode_sidebyside times (L2 flushed
before every call, events around the launch, medians of 20). Usage: python3 readfloor.py CUBIN"""
import ctypes
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, cu, ck, timed, sdpa_calls, decode_inputs  # noqa: E402

med = lambda t: sorted(t)[len(t) // 2] * 1e3
data = open(sys.argv[1], "rb").read() + b"\0"
buf = ctypes.create_string_buffer(data, len(data))
mod = ctypes.c_void_p()
torch.empty(1, device="cuda")
ck(cu.cuModuleLoadData(ctypes.byref(mod), buf), "readfloor")
fns = {}
for u in (4, 8, 16):
    f = ctypes.c_void_p()
    ck(cu.cuModuleGetFunction(ctypes.byref(f), mod, f"read{u}".encode()), "fn")
    fns[u] = f
fat = Module("internal/kernels/fa2.fatbin")
out = torch.zeros(4096, dtype=torch.int32, device="cuda")
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def read_call(buf_t, grid, threads, u):
    n16 = buf_t.numel() * buf_t.element_size() // 16
    share = (n16 + grid - 1) // grid
    a = [ctypes.c_uint64(buf_t.data_ptr()), ctypes.c_int64(n16), ctypes.c_int64(share), ctypes.c_uint64(out.data_ptr())]
    args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.pointer(x), ctypes.c_void_p) for x in a])

    def call():
        ck(cu.cuLaunchKernel(fns[u], grid, 1, 1, threads, 1, 1, 0, stream, args, None), "read")
    call.keep = (a, args)
    return call


print("device", torch.cuda.get_device_name(), "SMs", SMS, flush=True)
print("B1 Nq1 fp16; bytes = K+V read; us medians (cold L2); TB/s = bytes/time; read floor = best bare-read config", flush=True)
for hq, hkv, d, lens in ((32, 8, 128, (1024, 4096, 16384, 32768, 65536, 131072)), (8, 1, 128, (4096, 32768, 131072)),
                         (32, 8, 64, (32768, 131072))):
    for n in lens:
        q, k, v, sl = decode_inputs(1, n, hq, hkv, d, n)
        nbytes = 2 * n * hkv * d * 2
        kv = torch.randn(nbytes // 2, device="cuda", dtype=torch.float16)  # one buffer of the same bytes
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
        o, lse = torch.empty_like(q), torch.empty((1, hq, 1), device="cuda")
        ours = decode_call(fat, 80, q, k, v, o, lse, sl)
        cfgs = [(g, t, u) for g in (SMS, 2 * SMS, 4 * SMS, 8 * SMS) for t in (128, 256, 512, 1024) for u in (4, 8, 16)]
        best = None
        for g, t, u in cfgs:
            c = read_call(kv, g, t, u)
            tm = med(timed(c, 10))
            if best is None or tm < best[0]:
                best = (tm, g, t, u)
        rc = read_call(kv, *best[1:])
        tr, to, tc = [], [], []
        for _ in range(2):
            tr += timed(rc, 10)
            to += timed(ours, 10)
            tc += timed(cud, 10)
        r, a, c = med(tr), med(to), med(tc)
        tb = lambda t: nbytes / t / 1e6
        print(f"{hq}/{hkv} D{d} N{n:>6} {nbytes / 2**20:6.1f} MiB | read floor {r:6.1f} us {tb(r):4.2f} TB/s ({tb(r) / 4.8:4.0%}) "
              f"[{best[1]}x{best[2]}x{best[3]}] | ours {a:6.1f} {tb(a):4.2f} ({tb(a) / 4.8:4.0%}, {r / a:4.0%} of floor, splits {ours.splits}) "
              f"| cudnn {c:6.1f} {tb(c):4.2f} ({tb(c) / 4.8:4.0%}) | ours/cudnn speed {c / a:.2f}x", flush=True)
        del q, k, v, kv, qt, kt, vt, cud, ours
        torch.cuda.empty_cache()
