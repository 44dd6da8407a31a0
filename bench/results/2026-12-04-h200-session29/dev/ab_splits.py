# Decode builds x split counts, interleaved, L2 flushed, beside cuDNN. Usage: python3 ab_splits.py NAME=CUBIN ...
import sys
sys.path.insert(0, "kernels/dev")
import torch
import decode_sidebyside as ds
from sidebyside import Module
mods = [(a.split("=")[0], Module(a.split("=")[1])) for a in sys.argv[1:]]
print("builds:", " ".join(sys.argv[1:]), flush=True)
med = lambda t: sorted(t)[len(t) // 2] * 1e3
for b, hq, hkv, d, lengths in ((1, 32, 8, 64, (4096, 32768, 131072)), (1, 32, 8, 128, (1024, 32768, 131072)),
                               (1, 8, 1, 128, (4096, 32768)), (1, 8, 1, 64, (4096,)), (4, 32, 8, 128, (8192,))):
    for n in lengths:
        q, k, v, seqlens = ds.decode_inputs(b, n, hq, hkv, d, n + b)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        cud = ds.sdpa_calls(qt, kt, vt, hq, hkv)["cudnn"][0]
        rule = ds.decode_call(mods[0][1], 80, q, k, v, torch.empty_like(q), torch.empty((b, hq, 1), device="cuda"), seqlens).splits
        runs = []
        for name, m in mods:
            for s in sorted({rule, 2 * rule} if n >= 32768 else {rule}):
                o, l = torch.empty_like(q), torch.empty((b, hq, 1), device="cuda")
                runs.append((f"{name}/{s}", ds.decode_call(m, 80, q, k, v, o, l, seqlens, splits=s), o, l))
        for _, f, o, _ in runs:
            f(); f()
        torch.cuda.synchronize()
        ref = runs[0]
        same = all(torch.equal(ref[2], o) and torch.equal(ref[3], l) for nm, _, o, l in runs if nm.split("/")[1] == ref[0].split("/")[1])
        ok = all(f.counts.abs().sum().item() == 0 for _, f, _, _ in runs)
        ts, tc = [[] for _ in runs], []
        for _ in range(3):
            tc += ds.timed(cud, 10)
            for t, (_, f, _, _) in zip(ts, runs):
                t += ds.timed(f, 10)
        c = med(tc)
        line = "  ".join(f"{nm} {med(t):6.1f} ({c / med(t):.3f}x)" for (nm, _, _, _), t in zip(runs, ts))
        print(f"B{b} {hq}/{hkv} D{d} N{n:>6}: cudnn {c:6.1f} | {line} | same-split outputs {'equal' if same else 'DIFFER'}, counters {'zero' if ok else 'NONZERO'}", flush=True)
        del q, k, v, kt, vt, qt, cud, runs
        torch.cuda.empty_cache()
