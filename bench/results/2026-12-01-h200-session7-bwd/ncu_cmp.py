# Print ncu --csv --page raw output as metric rows x kernels (first launch of each kernel name).
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0]; data = [r for r in rows[2:] if len(r) == len(hdr)]
seen, cols = set(), []
for r in data:
    name = r[hdr.index("Kernel Name")][:40]
    if name not in seen:
        seen.add(name); cols.append((name, r))
print("metric".ljust(78), " | ".join(c[0][:28].rjust(28) for c in cols))
for i, h in enumerate(hdr):
    if "__" in h or h.startswith(("dram", "gpu", "sm", "l1", "lts", "launch")):
        print(h[:78].ljust(78), " | ".join(c[1][i][:28].rjust(28) for c in cols))
