"""Session 32 dev: the bare-read floor of a B 1 decode call's bytes, two ways -- session 20's
register loads (readfloor.cu, its best of grid x threads x loads in flight) and the bulk copy engine
(readfloor_tma.cu.txt, best of grid x chunk x stages) -- beside the shipped decode call and cuDNN, each
timed as decode_sidebyside times (L2 flushed before every call, events around the launch, medians).
Usage (repository root): python3 readfloor_tma.py REGS_CUBIN BULK_CUBIN"""
import ctypes
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, cu, ck, timed, sdpa_calls, decode_inputs  # noqa: E402

med = lambda t: sorted(t)[len(t) // 2] * 1e3
torch.empty(1, device="cuda")


def load(path, names):
    data = open(path, "rb").read() + b"\0"
    buf = ctypes.create_string_buffer(data, len(data))
    mod = ctypes.c_void_p()
    ck(cu.cuModuleLoadData(ctypes.byref(mod), buf), path)
    fns = {}
    for n in names:
        f = ctypes.c_void_p()
        ck(cu.cuModuleGetFunction(ctypes.byref(f), mod, n.encode()), n)
        fns[n] = f
    return fns


regs = load(sys.argv[1], ["read4", "read8", "read16"])
bulk = load(sys.argv[2], ["read_bulk"])["read_bulk"]
ck(cu.cuFuncSetAttribute(bulk, 8, 200 << 10), "max dynamic smem")  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
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


def regs_call(t, grid, threads, u):
    n16 = t.numel() * t.element_size() // 16
    share = (n16 + grid - 1) // grid
    return launch(regs[f"read{u}"], grid, threads, 0,
                  [ctypes.c_uint64(t.data_ptr()), ctypes.c_int64(n16), ctypes.c_int64(share), ctypes.c_uint64(out.data_ptr())])


def bulk_call(t, grid, chunk, stages):
    nbytes = t.numel() * t.element_size()
    share = (nbytes + grid - 1) // grid
    share = (share + 15) // 16 * 16  # bulk copies move multiples of 16 bytes
    return launch(bulk, grid, 32, chunk * stages,
                  [ctypes.c_uint64(t.data_ptr()), ctypes.c_int64(nbytes), ctypes.c_int64(share), ctypes.c_int32(chunk),
                   ctypes.c_int32(stages), ctypes.c_uint64(out.data_ptr())])


def best(make, cfgs):
    b = None
    for c in cfgs:
        tm = med(timed(make(*c), 8))
        if b is None or tm < b[0]:
            b = (tm, c)
    return b


print("device", torch.cuda.get_device_name(), "SMs", SMS, flush=True)
print("B1 Nq1 fp16; bytes = K+V read; us medians (cold L2); % of 4.8 TB/s", flush=True)
rcfg = [(g, t, u) for g in (SMS, 2 * SMS, 4 * SMS) for t in (256, 512, 1024) for u in (8, 16)]
bcfg = [(g, c, s) for g in (SMS, 2 * SMS, 4 * SMS) for c in (8 << 10, 16 << 10, 32 << 10) for s in (2, 3, 4, 6, 12)
        if c * s * (g // SMS) <= 200 << 10]
for hq, hkv, d, lens in ((32, 8, 128, (4096, 32768, 65536, 131072)), (32, 8, 64, (32768, 131072)), (8, 1, 128, (32768,))):
    for n in lens:
        q, k, v, sl = decode_inputs(1, n, hq, hkv, d, n)
        nbytes = 2 * n * hkv * d * 2
        kv = torch.randn(nbytes // 2, device="cuda", dtype=torch.float16)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        cud = sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
        o, lse = torch.empty_like(q), torch.empty((1, hq, 1), device="cuda")
        ours = decode_call(fat, 80, q, k, v, o, lse, sl)
        rb = best(lambda g, t, u: regs_call(kv, g, t, u), rcfg)
        bb = best(lambda g, c, s: bulk_call(kv, g, c, s), bcfg)
        rc, bc = regs_call(kv, *rb[1]), bulk_call(kv, *bb[1])
        tr, tb_, to, tc = [], [], [], []
        for _ in range(3):
            tr += timed(rc, 10)
            tb_ += timed(bc, 10)
            to += timed(ours, 10)
            tc += timed(cud, 10)
        r, bl, a, c = med(tr), med(tb_), med(to), med(tc)
        pct = lambda t: nbytes / t / 1e6 / 4.8
        print(f"{hq}/{hkv} D{d} N{n:>6} {nbytes / 2**20:6.1f} MiB | regs {r:6.1f} us {pct(r):4.0%} {rb[1]} "
              f"| bulk {bl:6.1f} us {pct(bl):4.0%} (grid, chunk, stages) {bb[1]} | ours {a:6.1f} {pct(a):4.0%} "
              f"| cudnn {c:6.1f} {pct(c):4.0%}", flush=True)
        del q, k, v, kv, qt, kt, vt, cud, ours
        torch.cuda.empty_cache()
