"""Session 19 call 8 (dev): (A) split counts for few kv heads with one-block splits allowed, on the
shipped fatbin; (B) D64 decode tiles: shipped (4 warps, 3 stages) vs 8 warps vs 4 stages (dev cubins).
L2 flushed before every timed call (decode_sidebyside's timed), interleaved, medians; outputs checked
against SDPA flash (2e-3) and the split counters back at zero."""
import sys
import torch
sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, timed, sdpa_calls, decode_inputs  # noqa: E402

med = lambda t: sorted(t)[len(t) // 2] * 1e3
fat = Module("internal/kernels/fa2.fatbin")


def check(fn, o, ref):
    o.fill_(float("nan"))
    fn()
    fn()
    torch.cuda.synchronize()
    return (o.float() - ref).abs().max().item() < 2e-3 and fn.counts.abs().sum().item() == 0


if "B" not in sys.argv[1:]:
    print("(A) split sweep: us at forced split counts (rule's *), cuDNN", flush=True)
    for hq, hkv, d, lens in ((8, 1, 128, (1024, 2048, 4096, 8192, 32768)), (16, 2, 128, (4096,)), (8, 1, 64, (4096,))):
        bc = 64 if d == 128 else 128
        for n in lens:
            q, k, v, sl = decode_inputs(1, n, hq, hkv, d, n + d)
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            cud, ref = sd["cudnn"][0], sd["flash"][0]().transpose(1, 2).float()
            o, lse = torch.empty_like(q), torch.empty((1, hq, 1), device="cuda")
            rule = decode_call(fat, 80, q, k, v, o, lse, sl).splits
            cands = sorted({rule} | {c for c in (4, 8, 16, 24, 32, 48, 64, 96, 132, 192, 256) if c <= n // bc})
            calls = {c: decode_call(fat, 80, q, k, v, o, lse, sl, splits=c) for c in cands}
            bad = [c for c, f in calls.items() if not check(f, o, ref)]
            ts, tc = {c: [] for c in cands}, []
            for _ in range(3):
                tc += timed(cud, 5)
                for c, f in calls.items():
                    ts[c] += timed(f, 5)
            best = min(cands, key=lambda c: med(ts[c]))
            line = " ".join(f"{c}{'*' if c == rule else ''}:{med(ts[c]):.1f}" for c in cands)
            print(f"{hq}/{hkv} D{d} N{n:>6}: cudnn {med(tc):5.1f} | best {best:>3} {med(ts[best]):5.1f} rule {rule} {med(ts[rule]):5.1f} | {line}"
                  + (f"  FAIL {bad}" if bad else ""), flush=True)
            del q, k, v, qt, kt, vt, sd, cud, ref, calls
            torch.cuda.empty_cache()

if "A" not in sys.argv[1:]:
    w8, s4 = Module(".build/c8/d64w8.cubin"), Module(".build/c8/d64s4.cubin")
    w8.tile_warps = 8
    s4.tile_smem = 4 * 2 * 128 * 64 * 2
    print("(B) D64 tiles: A shipped (4 warps, 3 stages), B 8 warps, C 4 stages (128 KiB); us, X/A", flush=True)
    for hq, hkv, lens in ((32, 8, (4096, 32768, 131072)), (8, 1, (32768,))):
        for n in lens:
            q, k, v, sl = decode_inputs(1, n, hq, hkv, 64, n + 7)
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
            sd = sdpa_calls(qt, kt, vt, hq, hkv)
            cud, ref = sd["cudnn"][0], sd["flash"][0]().transpose(1, 2).float()
            os_ = [torch.empty_like(q) for _ in range(3)]
            ls = [torch.empty((1, hq, 1), device="cuda") for _ in range(3)]
            fs = [decode_call(m, 80, q, k, v, o, l, sl) for m, o, l in zip((fat, w8, s4), os_, ls)]
            ok = [check(f, o, ref) for f, o in zip(fs, os_)]
            ts, tc = [[], [], []], []
            for _ in range(3):
                tc += timed(cud, 10)
                for t, f in zip(ts, fs):
                    t += timed(f, 10)
            a = med(ts[0])
            print(f"{hq}/{hkv} D64 N{n:>6} splits {fs[0].splits:>3}: A {a:5.1f}  B {med(ts[1]):5.1f} ({med(ts[1]) / a:.3f})  "
                  f"C {med(ts[2]):5.1f} ({med(ts[2]) / a:.3f})  cudnn {med(tc):5.1f} (A {med(tc) / a:.2f}x)  checks {ok}", flush=True)
            del q, k, v, qt, kt, vt, sd, cud, ref, fs, os_, ls
            torch.cuda.empty_cache()
