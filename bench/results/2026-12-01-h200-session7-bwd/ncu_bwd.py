# One D128 (or D=argv[1]) N2048 non-causal backward of ours (fatbin, single pass) and of SDPA flash
# (BSHD storage as bench/sdpa.py), for ncu: --kernel-name regex:"fa2_bwd_dkdvq|flash_bwd_dq_dk_dv"
import sys, torch, torch.nn.functional as F
sys.path.insert(0, "kernels/dev")
import sidebyside as sb
from torch.nn.attention import SDPBackend, sdpa_kernel
d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
b, h = 16384 // n, 2048 // d
m = sb.Module("internal/kernels/fa2.fatbin")
q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
o = torch.empty_like(q); lse = torch.empty(b, h, n, device="cuda"); di = torch.empty_like(lse)
g = tuple(torch.empty_like(x) for x in (q, k, v))
m.forward(80, q, k, v, o, lse, causal)()
call = m.backward(80, q, k, v, o, do, lse, di, *g, causal)
for _ in range(2): call()
qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
for x in (qt, kt, vt): x.requires_grad_(True)
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
for _ in range(2): torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)
torch.cuda.synchronize()
print("ok")
