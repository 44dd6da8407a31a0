# Session 17: PyTorch FlexAttention's backward with Gemma 2's modifiers at
# D 256 (softcap 30; causal; optionally a sliding window), the shapes of
# `goflash bench --headdims 256` (16k tokens per batch: B = 16384/N; H = 2048/256 = 8),
# fp16, backward only: torch.autograd.grad of one forward's output, CUDA events,
# median of 5 after 2 warm-up calls. Prints one line per case.
import sys, statistics, torch
from torch.nn.attention.flex_attention import flex_attention, create_block_mask

fa = torch.compile(flex_attention, dynamic=False)

def case(n, causal, softcap, window):
    b, h, d = 16384 // n, 8, 256
    g = torch.Generator(device="cuda").manual_seed(n)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, generator=g).requires_grad_() for _ in range(3))
    def score_mod(s, bi, hi, qi, ki):
        return softcap * torch.tanh(s / softcap)
    def mask_mod(bi, hi, qi, ki):
        m = qi >= ki if causal else qi >= 0
        if window:
            m = m & (qi - ki <= window)
        return m
    bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device="cuda") if (causal or window) else None
    out = fa(q, k, v, score_mod=score_mod if softcap else None, block_mask=bm)
    do = torch.randn_like(out)
    for _ in range(2):
        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    ts = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    ms = statistics.median(ts)
    flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)  # FA2's backward count, as goflash bench
    print(f"flex bwd D256 N {n} B {b} H {h} causal {causal} softcap {softcap} window {window}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s", flush=True)

print(torch.__version__, torch.cuda.get_device_name(), flush=True)
for n, causal, softcap, window in [(2048, False, 30.0, 0), (2048, True, 30.0, 0), (8192, False, 30.0, 0), (8192, True, 30.0, 0), (8192, True, 30.0, 4096)]:
    try:
        case(n, causal, softcap, window)
    except Exception as e:
        print(f"flex N {n} causal {causal} window {window}: {type(e).__name__}: {str(e)[:300]}", flush=True)
