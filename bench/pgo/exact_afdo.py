#!/usr/bin/env python3
"""An AutoFDO text profile from exact counts: callgrind's per-instruction
execution counts (--dump-instr=yes --compress-strings=no --compress-pos=no)
and its call counts, placed on lines by llvm-symbolizer (JSON, inlining),
with the rules of ecpi's writer (analyze/pgo/afdo_profile.cpp); bench/pgo.sh exact.

    exact_afdo.py CALLGRIND_OUT BINARY OBJECT_NAME > PROFILE.afdo

BINARY is the build with DWARF (the one callgrind ran without it, at the
same addresses); OBJECT_NAME ends the `ob=` path of its callgrind copy.
Heads are the calls into each function, as AutoFDO counts them."""
import collections, json, re, subprocess, sys

cg_path, binary, image_name = sys.argv[1], sys.argv[2], sys.argv[3]

def base_disc(e):
    if e & 1: return 0
    u = e >> 1
    return (((u >> 1) & 0xfe0) | (u & 0x1f)) if (u & 0x20) else (u & 0x1f)

# callgrind: self counts per address; calls per (site address, callee fn)
counts = collections.Counter()
calls = collections.Counter()   # (site, callee name) -> n
entries = collections.Counter() # callee -> calls
fn_min = {}
ob = fn = cfn = None
pending = None
for line in open(cg_path):
    line = line.rstrip('\n')
    if line.startswith('ob='): ob = line[3:]; continue
    if line.startswith('fn='): fn = line[3:]; continue
    if line.startswith('cfn='): cfn = line[4:]; continue
    if line.startswith('calls='):
        pending = int(line[6:].split()[0]); continue
    m = re.match(r'(0x[0-9a-f]+) \d+ (\d+)', line)
    if not m: continue
    if not ob or not ob.endswith(image_name):
        pending = None; continue
    a, n = int(m.group(1), 16), int(m.group(2))
    if pending is not None:
        calls[(a, cfn)] += pending
        entries[cfn] += pending
        pending = None
        continue
    counts[a] += n
    fn_min[fn] = min(fn_min.get(fn, a), a)

# load bias: most common (lowest address seen - symbol start)
syms = {}
for l in subprocess.run(['nm', binary], capture_output=True, text=True).stdout.splitlines():
    p = l.split()
    if len(p) == 3 and p[1] in 'tT': syms[p[2]] = int(p[0], 16)
diffs = collections.Counter(fn_min[f] - syms[f] for f in fn_min if f in syms)
bias = diffs.most_common(1)[0][0]
print(f'# bias {bias:#x} ({diffs.most_common(1)[0][1]} of {len(fn_min)} functions)', file=sys.stderr)

addrs = sorted(counts)
inp = '\n'.join(hex(a - bias) for a in addrs) + '\n'
out = subprocess.run(['llvm-symbolizer', '--obj=' + binary, '--inlining', '--output-style=JSON'],
                     input=inp, capture_output=True, text=True).stdout.splitlines()
frames_at = {}
for a, l in zip(addrs, out):
    d = json.loads(l)
    fr = [(s['FunctionName'], s['StartLine'], s['Line'], s['Discriminator']) for s in d['Symbol']]
    frames_at[a] = list(reversed(fr))  # outermost first

def loc(f):
    return ((f[2] - f[1]) & 0xffff, base_disc(f[3]))

def newf(name):
    return {'name': name, 'body': {}, 'calls': collections.defaultdict(collections.Counter), 'inl': {}, 'head': 0}

by_site = collections.defaultdict(list)
for (site, callee), n in calls.items(): by_site[site].append((callee, n))
top = {}
for a in addrs:
    fr = frames_at[a]
    if not fr or fr[0][0] in ('??', ''): continue
    c = counts[a]
    t = top.setdefault(fr[0][0], newf(fr[0][0]))
    at = t
    for i in range(len(fr) - 1):
        at = at['inl'].setdefault((loc(fr[i]), fr[i + 1][0]), newf(fr[i + 1][0]))
    if fr[-1][2] <= 0: continue
    L = loc(fr[-1])
    at['body'][L] = max(at['body'].get(L, 0), c)
    for callee, n in by_site.get(a, ()):
        if callee in syms:
            at['calls'][L][callee] += n
# heads: the calls into each function (AutoFDO counts calls to its start)
for name, t in top.items():
    t['head'] = entries.get(name, 0)

def total(f):
    f['total'] = sum(f['body'].values()) + sum(total(g) for g in f['inl'].values())
    return f['total']

def render(f, depth, out):
    for L in sorted(f['body']):
        s = ' ' * depth + (f'{L[0]}.{L[1]}' if L[1] else f'{L[0]}') + f': {f["body"][L]}'
        for tgt, n in sorted(f['calls'].get(L, {}).items()):
            s += f' {tgt}:{n}'
        out.append(s)
    for (L, name), g in sorted(f['inl'].items()):
        if g['total'] == 0: continue
        out.append(' ' * depth + (f'{L[0]}.{L[1]}' if L[1] else f'{L[0]}') + f': {name}:{g["total"]}')
        render(g, depth + 1, out)

out = []
for name, t in sorted(top.items(), key=lambda kv: -total(kv[1])):
    if t['total'] == 0: continue
    out.append(f'{name}:{t["total"]}:{t["head"]}')
    render(t, 1, out)
print('\n'.join(out))
