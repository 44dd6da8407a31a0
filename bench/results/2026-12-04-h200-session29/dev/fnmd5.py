import subprocess, sys, re, hashlib
def fns(p):
    out = subprocess.run(["cuobjdump", "-sass", p], capture_output=True, text=True).stdout
    h, f = {}, None
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m: f = m.group(1); h[f] = hashlib.md5(); continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*?)\s*/\* 0x", line)
        if f and m: h[f].update(m.group(1).encode())
    return {k: v.hexdigest() for k, v in h.items()}
base = fns(sys.argv[1])
for p in sys.argv[2:]:
    o = fns(p)
    print(p, "differs:", sorted(k for k in base if base[k] != o.get(k)))
