#!/usr/bin/env python3
"""Mixed AutoFDO text profiles, to tell which part of ecpi's profile costs
gain against the exact one (bench/pgo.sh exact; docs/PGO.md):

    hybrid_afdo.py no-targets EXACT OUT
        EXACT without call targets (every `TARGET:COUNT` after a record)
    hybrid_afdo.py targets OURS EXACT OUT
        OURS with EXACT's call targets on each record both have (the same
        location under the same inline context)
    hybrid_afdo.py functions OURS EXACT OUT NAME[,NAME...]
        OURS with the top-level entries NAME... taken whole from EXACT
        (their inlined callees too)

Build with -fprofile-sample-use=OUT, time with VARIANTS (bench/pgo.sh)."""
import sys


def records(path):
    """Yield (depth, context, loc, parts, line) for every line: context is
    the function and inline frames above the record, parts its fields after
    the colon (loc None for a top-level entry)."""
    stack = []
    for line in open(path):
        s = line.rstrip('\n')
        body = s.strip()
        if not body:
            continue
        depth = len(s) - len(s.lstrip(' '))
        if depth == 0:
            stack = [body.rsplit(':', 2)[0]]
            yield depth, tuple(stack), None, None, s
            continue
        stack = stack[:depth]
        loc, rest = body.split(':', 1)
        parts = rest.strip().split()
        yield depth, tuple(stack), loc, parts, s
        if len(parts) == 1 and not parts[0][0].isdigit():  # an inlined callee opens
            stack.append(loc + '>' + parts[0].rsplit(':', 1)[0])


def is_count_record(parts):
    return parts is not None and parts[0].isdigit()


def no_targets(exact):
    out = []
    for depth, _, loc, parts, s in records(exact):
        out.append(' ' * depth + f'{loc}: {parts[0]}' if is_count_record(parts) else s)
    return out


def with_targets(ours, exact):
    found = {(ctx, loc): parts[1:] for _, ctx, loc, parts, _ in records(exact)
             if is_count_record(parts) and len(parts) > 1}
    out = []
    for depth, ctx, loc, parts, s in records(ours):
        t = found.get((ctx, loc)) if is_count_record(parts) else None
        out.append(' ' * depth + f'{loc}: {parts[0]} ' + ' '.join(t) if t else s)
    return out


def entries(path):
    got, order = {}, []
    for depth, ctx, _, _, s in records(path):
        if depth == 0:
            order.append(ctx[0])
            got[ctx[0]] = []
        got[order[-1]].append(s)
    return got, order


def with_functions(ours, exact, names):
    mine, order = entries(ours)
    theirs, _ = entries(exact)
    out = []
    for n in order:
        out += theirs[n] if n in names and n in theirs else mine[n]
    for n in sorted(names - set(order)):
        out += theirs.get(n, [])
    return out


def main(argv):
    mode = argv[1] if len(argv) > 1 else ''
    if mode == 'no-targets' and len(argv) == 4:
        lines, out = no_targets(argv[2]), argv[3]
    elif mode == 'targets' and len(argv) == 5:
        lines, out = with_targets(argv[2], argv[3]), argv[4]
    elif mode == 'functions' and len(argv) == 6:
        lines, out = with_functions(argv[2], argv[3], set(argv[5].split(','))), argv[4]
    else:
        sys.exit(__doc__)
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main(sys.argv)
