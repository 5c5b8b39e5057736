#!/usr/bin/env python3
"""Compare two AutoFDO text profiles (bench/pgo.sh exact):

    compare_afdo.py OURS.afdo EXACT.afdo

First a summary over every location of functions in both: the exact
profile's counts on locations ours leaves out, ours on locations the exact
one does not have (code that did not run), and the weighted mean |ln ratio|
of the counts both have (weights: exact counts). Then functions missing from
ours, per hot function head/total/lines, the largest locations missing, and
the largest over- and under-estimates."""
import sys, collections, math

def parse(path):
    funcs = {}
    stack = []
    for line in open(path):
        line = line.rstrip('\n')
        if not line.strip(): continue
        depth = len(line) - len(line.lstrip(' '))
        body = line.strip()
        if depth == 0:
            name, total, head = body.rsplit(':', 2)
            f = {'name': name, 'total': int(total), 'head': int(head), 'body': {}, 'calls': {}, 'inl': {}}
            funcs[name] = f; stack = [f]; continue
        stack = stack[:depth]
        loc, rest = body.split(':', 1)
        rest = rest.strip().split()
        if len(rest) == 1 and ':' in rest[0] and not rest[0][0].isdigit():
            callee, total = rest[0].rsplit(':', 1)
            g = {'name': callee, 'total': int(total), 'head': 0, 'body': {}, 'calls': {}, 'inl': {}}
            stack[-1]['inl'][(loc, callee)] = g; stack.append(g)
        else:
            stack[-1]['body'][loc] = int(rest[0])
            stack[-1]['calls'][loc] = {t.rsplit(':', 1)[0]: int(t.rsplit(':', 1)[1]) for t in rest[1:]}
    return funcs


def main():
    A, B = parse(sys.argv[1]), parse(sys.argv[2])
    ta, tb = sum(f['total'] for f in A.values()), sum(f['total'] for f in B.values())
    print(f'totals: ours {ta:,} exact {tb:,}; functions ours {len(A)} exact {len(B)}')
    miss = sorted(((f['total'], n, f['head']) for n, f in B.items() if n not in A), reverse=True)
    print(f'exact functions missing from ours: {len(miss)}, {sum(m[0] for m in miss)/tb:.1%} of exact total')
    for t, n, h in miss[:25]: print(f'   {n:40s} total {t:>12,} head {h:>10,}')
    extra = [n for n in A if n not in B]
    print('ours only:', extra[:20])
    print(f'\n{"function":38s} {"head o/e":>22s} {"total o/e":>28s}  lines(o only/e only/both)  wlogratio')
    def lines(f, pre=''):
        out = {}
        for loc, c in f['body'].items(): out[pre + loc] = c
        for (loc, callee), g in f['inl'].items(): out.update(lines(g, pre + loc + '>' + callee + '/'))
        return out
    def shared():
        # (name, its profile in ours, in exact, their lines) for the functions both have
        for n, fb in B.items():
            fa = A.get(n)
            if fa: yield n, fa, fb, lines(fa), lines(fb)
    eo = oo = w = wl = 0
    for n, fa, fb, la, lb in shared():
        eo += sum(c for k, c in lb.items() if k not in la)
        oo += sum(c for k, c in la.items() if k not in lb)
        for k in lb:
            if k in la: w += lb[k]; wl += lb[k] * abs(math.log((la[k] + 1) / (lb[k] + 1)))
    print(f'summary: exact counts on locations ours lacks {eo:,} ({eo/tb:.1%} of exact total); '
          f'ours on locations that did not run {oo:,} ({oo/ta:.1%} of ours); '
          f'weighted mean |ln(ours/exact)| on shared locations {wl/max(w,1):.3f}')
    rows = []
    for n, fb in sorted(B.items(), key=lambda kv: -kv[1]['total'])[:40]:
        fa = A.get(n)
        if not fa: continue
        la, lb = lines(fa), lines(fb)
        both = [k for k in lb if k in la]
        w = sum(lb[k] for k in both)
        wl = sum(lb[k] * abs(math.log((la[k] + 1) / (lb[k] + 1))) for k in both) / max(w, 1)
        print(f'{n:38s} {fa["head"]:>10,}/{fb["head"]:<10,} {fa["total"]:>13,}/{fb["total"]:<13,} {len([k for k in la if k not in lb]):>4}/{len([k for k in lb if k not in la]):>4}/{len(both):>4}  {wl:.2f}')

    print('\nlargest exact lines missing from ours (function, loc, exact count)')
    miss = []
    for n, fa, fb, la, lb in shared():
        for k, c in lb.items():
            if k not in la: miss.append((c, n, k))
    miss.sort(reverse=True)
    for c, n, k in miss[:25]: print(f'  {n:34s} {k:40s} {c:>12,}')
    print(f'  sum of missing-line counts: {sum(m[0] for m in miss):,}')
    print('\nlargest over/under estimates (both present), by |log ratio| * exact count')
    d = []
    for n, fa, fb, la, lb in shared():
        for k in lb:
            if k in la: d.append((lb[k] * abs(math.log((la[k] + 1) / (lb[k] + 1))), n, k, la[k], lb[k]))
    d.sort(reverse=True)
    for s, n, k, a, b in d[:25]: print(f'  {n:34s} {k:40s} ours {a:>12,} exact {b:>12,}')

    # Where the error lies: per function, exact count x |ln(ours/exact)| summed
    # over its locations (a location one profile lacks counts as a factor of
    # 1,000: ln 1000 ~ 6.9), split into the function's own lines, its inlined
    # callees' lines and its call targets' counts; the head's error beside it.
    # Sorted by the sum: the functions whose counts cost most.
    def targets(f, pre=''):
        out = {}
        for loc, calls in f['calls'].items():
            for t, c in calls.items(): out[pre + loc + '->' + t] = c
        for (loc, callee), g in f['inl'].items(): out.update(targets(g, pre + loc + '>' + callee + '/'))
        return out
    def mass(la, lb):
        m = 0.0
        for k, c in lb.items(): m += c * (abs(math.log((la[k] + 1) / (c + 1))) if k in la else math.log(1000))
        for k, c in la.items():
            if k not in lb: m += c * math.log(1000)
        return m
    rows = []
    for n, fa, fb, la, lb in shared():
        own = mass({k: v for k, v in la.items() if '>' not in k}, {k: v for k, v in lb.items() if '>' not in k})
        inl = mass({k: v for k, v in la.items() if '>' in k}, {k: v for k, v in lb.items() if '>' in k})
        tg = mass(targets(fa), targets(fb))
        rows.append((own + inl + tg, n, own, inl, tg, fa['head'], fb['head']))
    rows.sort(reverse=True)
    all_mass = sum(r[0] for r in rows)
    print(f'\nerror mass by function (exact count x |ln ratio|; a location one side lacks: x ln 1000), '
          f'total {all_mass:.3g}')
    print(f'  {"function":36s} {"share":>6s} {"own lines":>10s} {"inlined":>10s} {"targets":>10s}  head ours/exact')
    for m, n, own, inl, tg, ha, hb in rows[:20]:
        print(f'  {n:36s} {m/all_mass:6.1%} {own:10.3g} {inl:10.3g} {tg:10.3g}  {ha:,}/{hb:,}')


if __name__ == "__main__":
    main()
