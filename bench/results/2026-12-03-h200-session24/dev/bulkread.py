"""Session 24 dev: the bulk-copy (TMA, cp.async.bulk) read floor of a B 1 decode call's K and V beside
session 20's 16-byte-load floor (readfloor.cu), the shipped decode call and cuDNN, timed as
decode_sidebyside times (L2 flushed before every call, events, medians). Each floor is the best of a
sweep of its configurations. Usage: python3 bulkread.py BULK_CUBIN READFLOOR_CUBIN (session 20's dev/readfloor.cu, built with nvcc -arch=sm_90)"""
import ctypes
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, cu, ck, timed, sdpa_calls, decode_inputs  # noqa: E402

med = lambda t: sorted(t)[len(t) // 2] * 1e3
torch.empty(1, device="cuda")


def load(path):
    data = open(path, "rb").read() + b"\0"
    buf = ctypes.create_string_buffer(data, len(data))
    mod = ctypes.c_void_p()
    ck(cu.cuModuleLoadData(ctypes.byref(mod), buf), path)
    load.keep.append(buf)
    return mod


load.keep = []


def fn(mod, name):
    f = ctypes.c_void_p()
    ck(cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()), name)
    return f


bulk_mod, read_mod = load(sys.argv[1]), load(sys.argv[2])
bulk = fn(bulk_mod, "bulkread")
ck(cu.cuFuncSetAttribute(bulk, 8, 200 * 1024), "smem attr")  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
reads = {u: fn(read_mod, f"read{u}") for u in (4, 8, 16)}
fat = Module("internal/kernels/fa2.fatbin")
out = torch.zeros(8192, dtype=torch.int32, device="cuda")
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def launch(f, grid, threads, smem, vals):
    args = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.pointer(x), ctypes.c_void_p) for x in vals])

    def call():
        ck(cu.cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, smem, stream, args, None), "launch")
    call.keep = (vals, args)
    return call


def bulk_call(t, per_sm, chunk, stages):
    n = t.numel() * t.element_size()
    grid = per_sm * SMS
    share = (n // grid + chunk - 1) // chunk * chunk
    grid = (n + share - 1) // share
    return launch(bulk, grid, 32, chunk * stages, [ctypes.c_uint64(t.data_ptr()), ctypes.c_int64(n), ctypes.c_int64(share),
                                                    ctypes.c_int32(chunk), ctypes.c_int32(stages), ctypes.c_uint64(out.data_ptr())])


def read_call(t, grid, threads, u):
    n16 = t.numel() * t.element_size() // 16
    share = (n16 + grid - 1) // grid
    return launch(reads[u], grid, threads, 0, [ctypes.c_uint64(t.data_ptr()), ctypes.c_int64(n16), ctypes.c_int64(share),
                                                ctypes.c_uint64(out.data_ptr())])


def best_of(calls):
    best = None
    for cfg, c in calls:
        tm = med(timed(c, 8))
        if best is None or tm < best[0]:
            best = (tm, cfg, c)
    return best


print("device", torch.cuda.get_device_name(), "SMs", SMS, flush=True)
print("B1 Nq1 fp16; bytes = K+V read; us medians (cold L2); % of 4.8 TB/s; floors = best of a sweep", flush=True)
bulk_cfgs = [(p, c, s) for p in (1, 2, 4) for c in (4096, 8192, 16384, 32768) for s in (2, 3, 4, 6, 8) if p * c * s <= 200 * 1024 and s <= 16]
read_cfgs = [(g, t, u) for g in (SMS, 4 * SMS, 8 * SMS) for t in (256, 512, 1024) for u in (8, 16)]
for hq, hkv, d, lens in ((32, 8, 128, (16384, 32768, 65536, 131072)), (8, 1, 128, (32768,)), (32, 8, 64, (32768, 131072))):
    for n in lens:
        q, k, v, sl = decode_inputs(1, n, hq, hkv, d, n)
        nbytes = 2 * n * hkv * d * 2
        kv = torch.randn(nbytes // 2, device="cuda", dtype=torch.float16)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
        o, lse = torch.empty_like(q), torch.empty((1, hq, 1), device="cuda")
        ours = decode_call(fat, 80, q, k, v, o, lse, sl)
        bb = best_of([(c, bulk_call(kv, *c)) for c in bulk_cfgs])
        rb = best_of([(c, read_call(kv, *c)) for c in read_cfgs])
        tb_, tr, to, tc = [], [], [], []
        for _ in range(3):
            tb_ += timed(bb[2], 10)
            tr += timed(rb[2], 10)
            to += timed(ours, 10)
            tc += timed(cud, 10)
        b_, r, a, c = med(tb_), med(tr), med(to), med(tc)
        pct = lambda t: nbytes / t / 1e6 / 4.8
        print(f"{hq}/{hkv} D{d} N{n:>6} {nbytes / 2**20:6.1f} MiB | bulk floor {b_:6.1f} us ({pct(b_):4.0%}) [{bb[1]}] "
              f"| load floor {r:6.1f} ({pct(r):4.0%}) [{rb[1]}] | ours {a:6.1f} ({pct(a):4.0%}) | cudnn {c:6.1f} ({pct(c):4.0%})", flush=True)
        del q, k, v, kv, qt, kt, vt, cud, ours
        torch.cuda.empty_cache()
