#!/usr/bin/env python3
"""usage: cgtree.py OUT.cg RPCS FUNCTION...: for each function (a suffix of its name), its inclusive
instructions per RPC and those of its callees (>= 8 per RPC), from callgrind_annotate --tree=calling."""
import re,sys,subprocess
cg=sys.argv[1]; R=int(sys.argv[2]); fns=sys.argv[3:]
txt=subprocess.run(['callgrind_annotate','--inclusive=yes','--tree=calling','--threshold=100',cg],capture_output=True,text=True).stdout
line_re = re.compile(r'^\s*([\d,]+) \([ \d.]+%\)\s+([>*<])\s+(?:\?\?\?:)?(.*?)(?: \(([\d,]+)x\))?(?: \[.*\])?$')
for fn in fns:
    for block in txt.split('\n\n'):
        lines=block.splitlines()
        star=[l for l in lines if line_re.match(l) and line_re.match(l).group(2)=='*']
        if not star: continue
        m=line_re.match(star[0])
        if not m.group(3).endswith(fn): continue
        print(f"{m.group(3)[-80:]}  incl {int(m.group(1).replace(',',''))/R:,.0f}/RPC")
        for l in lines:
            mm=line_re.match(l)
            if mm and mm.group(2)=='>':
                v=int(mm.group(1).replace(',',''))/R
                if v>=8: print(f"    {v:8,.0f}  {mm.group(3)[-90:]} ({mm.group(4)}x)")
        break
