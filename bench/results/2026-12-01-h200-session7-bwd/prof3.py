# Kernel time (torch.profiler, CUDA activity) of one forward+backward, SDPA flash (BSHD storage, as bench/sdpa.py)
# beside ours (the fatbin's default single pass through sidebyside.Module), same tensors, one process.
import sys, torch, torch.nn.functional as F
sys.path.insert(0, "kernels/dev")
import sidebyside as sb
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import profile, ProfilerActivity
def kern(fn, reps=10):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps): fn()
        torch.cuda.synchronize()
    tot = {}
    for e in p.events():
        if e.device_type.name == "CUDA": tot[e.name] = tot.get(e.name, 0) + e.device_time / reps
    return tot
m = sb.Module("internal/kernels/fa2.fatbin")
print("kernel-level forward+backward, ms per call (sum of its kernels); ours/flash = flash time / ours")
for d in (64, 128):
  for causal in (False, True):
    for n in (2048, 4096, 8192):
      b, h = 16384 // n, 2048 // d
      q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
      o = torch.empty_like(q); lse = torch.empty(b, h, n, device="cuda"); di = torch.empty_like(lse)
      g = tuple(torch.empty_like(x) for x in (q, k, v))
      m.forward(80, q, k, v, o, lse, causal)()
      fwd = m.forward(80, q, k, v, o, lse, causal)
      bwd = m.backward(80, q, k, v, o, do, lse, di, *g, causal)
      bdet = m.backward(80, q, k, v, o, do, lse, di, *g, causal, deterministic=True)
      ours = lambda: (fwd(), bwd())
      det = lambda: (fwd(), bdet())
      qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
      for x in (qt, kt, vt): x.requires_grad_(True)
      with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
          out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
      def step():
          with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
              torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), dot)
      fl = kern(step)
      ko, kd = kern(ours), kern(det)
      tf, to, td = (sum(x.values()) / 1e3 for x in (fl, ko, kd))
      print(f"D{d} causal={int(causal)} N{n}: flash {tf:.3f} ours {to:.3f} det {td:.3f} ms | ours/flash {tf/to:.3f} det/flash {tf/td:.3f} | ours: "
            + " ".join(f"{k2[:24]}={t/1e3:.3f}" for k2, t in ko.items()), flush=True)
      del q, k, v, do, o, lse, di, g, qt, kt, vt, dot, out, ours, det, fwd, bwd, bdet
      torch.cuda.empty_cache()
