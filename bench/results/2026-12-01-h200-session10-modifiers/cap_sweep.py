"""Session 10 dev sweep: the softcap's 1/c folded into Q (mode 1) and the tanh of two scores in one
tanh.approx.f16x2 (mode 2) against the shipped per-score x*cap_in (mode 0), D64 and D128, beside the
plain kernel of the same cubin, interleaved, N 8192 (B 2, H 32 at D64; H 16 at D128), non-causal and
window right 0 (= causal, against the plain causal kernel). Correctness first: each mode's softcap
(and softcap + ALiBi) kernel vs float32 math at N 1024, next to the fp16/bf16 rounding of that
reference and the shipped mode's error."""
import ctypes, math, sys, torch
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, w):
    if r != 0: raise RuntimeError(f"{w}: {r}")
class P(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "lse")] + \
               [(n, ctypes.c_int64) for n in ("qb","qs","qh","kb","ks","kh","vb","vs","vh","ob","os","oh")] + \
               [(n, ctypes.c_int32) for n in ("b", "nq", "nk", "hq", "hkv", "d")] + \
               [("scale_log2", ctypes.c_float), ("scale", ctypes.c_float), ("alibi", ctypes.c_uint64),
                ("wl", ctypes.c_int32), ("wr", ctypes.c_int32), ("softcap", ctypes.c_float), ("pad", ctypes.c_int32),
                ("cuq", ctypes.c_uint64), ("cuk", ctypes.c_uint64)]
assert ctypes.sizeof(P) == 208
torch.empty(1, device="cuda")
SMEM = {64: 81920, 128: 98304}
NAMES = ("plain", "plainc", "modonly", "alibi", "cap", "capalibi", "capb")
def load(path):
    data = open(path, "rb").read()
    buf = ctypes.create_string_buffer(data, len(data))
    m = ctypes.c_void_p(); ck(cu.cuModuleLoadData(ctypes.byref(m), buf), path)
    fs = {}
    for d in (64, 128):
        for s in NAMES:
            f = ctypes.c_void_p(); ck(cu.cuModuleGetFunction(ctypes.byref(f), m, f"{s}{d}".encode()), s)
            ck(cu.cuFuncSetAttribute(f, 8, SMEM[d]), "smem"); fs[(s, d)] = f
    return buf, m, fs
def call(f, q, k, v, o, lse, cap, wr, slopes=0):
    b, n, h, d = q.shape
    p = P(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), *q.stride()[:3], *k.stride()[:3],
          *v.stride()[:3], *o.stride()[:3], b, n, n, h, h, d, 1 / math.sqrt(d) * 1.4426950408889634, 1 / math.sqrt(d),
          slopes, -1, wr, cap, 0, 0, 0)
    args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(p), ctypes.c_void_p))
    st = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    def run(): ck(cu.cuLaunchKernel(f, (n + 127) // 128, b * h, 1, 128, 1, 1, SMEM[d], st, args, None), "launch")
    run.keep = (p, args); return run
def timed(fn, reps):
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000); e0.record(); fn(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    return ts
modes = [int(x) for x in sys.argv[1:]] or [0, 1, 2]
M = {m: load(f"cap{m}.cubin") for m in modes}
torch.manual_seed(0)
for d in (64, 128):
    for wr, dt, alibi in ((-1, torch.float16, False), (0, torch.float16, False), (-1, torch.float16, True),
                          (-1, torch.bfloat16, False), (0, torch.bfloat16, False)):
        n, h = 1024, 4
        q, k, v = (torch.randn(1, n, h, d, device="cuda", dtype=dt) * s for s in (2, 2, 1))
        qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))
        s = qf @ kf.transpose(-1, -2) / math.sqrt(d); s = 30 * torch.tanh(s / 30)
        sl = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device="cuda")
        if alibi:
            dist = (torch.arange(n, device="cuda")[:, None] - torch.arange(n, device="cuda")[None, :]).abs().float()
            s = s - sl[:, None, None] * dist
        if wr == 0: s = s.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        ref = (torch.softmax(s, -1) @ vf).transpose(1, 2)
        lref = torch.logsumexp(s, -1)
        base = (ref.to(dt).float() - ref).abs().max().item()
        errs = []
        for mm in modes:
            name = "capb" if dt == torch.bfloat16 else "capalibi" if alibi else "cap"
            o = torch.full_like(q, float("nan")); lse = torch.empty(1, h, n, device="cuda")
            call(M[mm][2][(name, d)], q, k, v, o, lse, 30.0, wr, sl.data_ptr() if alibi else 0)(); torch.cuda.synchronize()
            errs.append(f"mode {mm}: |O| {(o.float() - ref).abs().max().item():.3e} |L| {(lse - lref).abs().max().item():.2e}")
        print(f"check D{d} {str(dt)[6:]} causal={wr == 0} alibi={alibi} (ref rounded to {str(dt)[6:]}: {base:.3e}): " + "; ".join(errs), flush=True)
for d, h in ((64, 32), (128, 16)):
    for wr in (-1, 0):
        b, n = 2, 8192
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q); lse = torch.empty(b, h, n, device="cuda")
        fl = 4 * b * h * n * n * d / (2 if wr == 0 else 1)
        m0 = modes[0]
        sl = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device="cuda")
        runs = {"plain": call(M[m0][2][("plain" if wr < 0 else "plainc", d)], q, k, v, o, lse, 0.0, wr),
                "modonly": call(M[m0][2][("modonly", d)], q, k, v, o, lse, 0.0, wr),
                "alibi": call(M[m0][2][("alibi", d)], q, k, v, o, lse, 0.0, wr, sl.data_ptr())}
        for mm in modes:
            runs[f"cap{mm}"] = call(M[mm][2][("cap", d)], q, k, v, o, lse, 30.0, wr)
            runs[f"capalibi{mm}"] = call(M[mm][2][("capalibi", d)], q, k, v, o, lse, 30.0, wr, sl.data_ptr())
        ts = {x: [] for x in runs}
        for f in runs.values(): timed(f, 3)
        for _ in range(6):
            for x, f in runs.items(): ts[x] += timed(f, 5)
        tf = {x: fl / sorted(t)[len(t) // 2] / 1e9 for x, t in ts.items()}
        print(f"N 8192 B 2 H {h} D{d} window_right={wr}: " + "  ".join(f"{x} {t:.1f}" for x, t in tf.items())
              + " | cost " + "  ".join(f"{x} {tf['plain'] / t:.3f}x" for x, t in tf.items() if x != "plain"), flush=True)
