import re,subprocess,sys
L=open(sys.argv[1]).read().split('\n')
for i,l in enumerate(L):
    m=re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'",l)
    if m and re.search(sys.argv[2], m.group(1)):
        name=subprocess.run(['c++filt',m.group(1)],capture_output=True,text=True).stdout.strip()
        sp=[x.strip() for x in L[i+1:i+4] if 'spill' in x]
        reg=[x.split(':',1)[1].strip().split(',')[0] for x in L[i+1:i+4] if 'Used' in x]
        print(f"{name} {m.group(2)}: {sp[0] if sp else ''}; {reg[0] if reg else ''}")
