"""Session 20 dev: one CTA per SM (the rule's 16 splits x 8 kv heads) or two (32-33) on long caches,
with session 19's shared merge: 32/8 B 1 at 32k-128k, D64 and D128, beside cuDNN (L2 flushed,
interleaved, medians of 15; outputs checked against SDPA flash and the counters back at zero)."""
import sys

import torch

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, decode_call, timed, sdpa_calls, decode_inputs  # noqa: E402

med = lambda t: sorted(t)[len(t) // 2] * 1e3
fat = Module("internal/kernels/fa2.fatbin")
print("32/8 B1: us at forced split counts (rule's *), cuDNN; TB/s of the best", flush=True)
for d in (64, 128):
    for n in (32768, 65536, 131072):
        q, k, v, sl = decode_inputs(1, n, 32, 8, d, n + d)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        sd = sdpa_calls(qt, kt, vt, 32, 8)
        cud, ref = sd["cudnn"][0], sd["flash"][0]().transpose(1, 2).float()
        o, lse = torch.empty_like(q), torch.empty((1, 32, 1), device="cuda")
        rule = decode_call(fat, 80, q, k, v, o, lse, sl).splits
        cands = sorted({rule, 16, 24, 32, 33, 48})
        calls = {c: decode_call(fat, 80, q, k, v, o, lse, sl, splits=c) for c in cands}
        bad = []
        for c, f in calls.items():
            o.fill_(float("nan"))
            f()
            f()
            torch.cuda.synchronize()
            if not ((o.float() - ref).abs().max().item() < 2e-3 and f.counts.abs().sum().item() == 0):
                bad.append(c)
        ts, tc = {c: [] for c in cands}, []
        for _ in range(3):
            tc += timed(cud, 5)
            for c, f in calls.items():
                ts[c] += timed(f, 5)
        best = min(cands, key=lambda c: med(ts[c]))
        nb = 4 * n * 8 * d
        line = " ".join(f"{c}{'*' if c == rule else ''}:{med(ts[c]):.1f}" for c in cands)
        print(f"D{d} N{n:>6}: cudnn {med(tc):6.1f} | best {best} {med(ts[best]):6.1f} ({nb / med(ts[best]) / 1e6:.2f} TB/s, "
              f"{med(tc) / med(ts[best]):.2f}x cudnn) rule {rule} {med(ts[rule]):6.1f} ({med(tc) / med(ts[rule]):.2f}x) | {line}"
              + (f"  FAIL {bad}" if bad else ""), flush=True)
        del q, k, v, qt, kt, vt, sd, cud, ref, calls
        torch.cuda.empty_cache()
