# Kernel-level times of SDPA flash's backward and fwd+bwd (torch.profiler), in the
# two layouts the harnesses use: BSHD storage viewed as BHSD (bench/sdpa.py) and
# BHSD contiguous (sidebyside.py); plus the CUDA-event medians as each harness takes them.
import statistics, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import profile, ProfilerActivity
def ev(fn, reps=20, sleep=False):
    for _ in range(3): fn()
    ts=[]
    for _ in range(reps):
        a,b=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        if sleep: torch.cuda._sleep(200_000)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)
def kern(fn, reps=10):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps): fn()
        torch.cuda.synchronize()
    tot={}
    for e in p.events():
        if e.device_type.name=="CUDA":
            tot[e.name]=tot.get(e.name,0)+e.device_time/reps
    return tot
for d in (64,128):
  for causal in (False,True):
    for n in (2048,8192):
      b,h=16384//n,2048//d
      for layout in ("bshd","bhsd"):
        if layout=="bshd":
            q,k,v,g=(torch.randn(b,n,h,d,device="cuda",dtype=torch.float16).transpose(1,2) for _ in range(4))
        else:
            q,k,v,g=(torch.randn(b,h,n,d,device="cuda",dtype=torch.float16) for _ in range(4))
        for x in (q,k,v): x.requires_grad_(True)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            out=F.scaled_dot_product_attention(q,k,v,is_causal=causal)
            bwd=lambda: torch.autograd.grad(out,(q,k,v),g,retain_graph=True)
            fb=lambda: torch.autograd.grad(F.scaled_dot_product_attention(q,k,v,is_causal=causal),(q,k,v),g)
            fw=lambda: F.scaled_dot_product_attention(q,k,v,is_causal=causal)
            kb=kern(bwd); kf=kern(fb)
            r=dict(fwd=ev(fw),bwd=ev(bwd),bwd_sleep=ev(bwd,sleep=True),fwdbwd=ev(fb),fwdbwd_sleep=ev(fb,sleep=True))
        F0=4*b*h*n*n*d/(2 if causal else 1)
        ks=" ".join(f"{k[:40]}={t/1e3:.3f}" for k,t in sorted(kb.items(),key=lambda x:-x[1]))
        print(f"D{d} c{int(causal)} N{n} {layout}: ev fwd {r['fwd']:.3f} bwd {r['bwd']:.3f} (sleep {r['bwd_sleep']:.3f}) fwdbwd {r['fwdbwd']:.3f} (sleep {r['fwdbwd_sleep']:.3f}) ms;"
              f" kernels bwd sum {sum(kb.values())/1e3:.3f} fwdbwd sum {sum(kf.values())/1e3:.3f} ms | bwd TF ev {2.5*F0/r['bwd']/1e9:.0f} kern {2.5*F0/(sum(kb.values())/1e3)/1e9:.0f} | {ks}", flush=True)
        del q,k,v,g,out
