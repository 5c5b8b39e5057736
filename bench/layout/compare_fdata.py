#!/usr/bin/env python3
"""Where does one BOLT profile (ecpi's) lose layout gain against another
(BOLT's exact instrumented counts)? (issue 17)

Reads two BOLT fdata files (`1 FUNC OFF 1 FUNC OFF MISPRED COUNT`) and the
binary they describe, and sorts the exact profile's conditional branches
into what the tested profile made of them:

  no function    the function has no intra-function record in the tested
                 profile at all (BOLT lays it out as unprofiled)
  no branch      the function has records, this branch has none
  disagrees      both profiles have the branch and put its hot side on
                 different edges (taken against fall-through)
  agrees         both profiles put the hot side on the same edge

Each branch weighs |taken - fall-through| of the exact counts: the taken
branches a layout adds by putting the wrong side in line. Counts are
compared after normalising each function by its busiest branch (so a
tested profile whose totals are off by a constant still agrees).
Call edges (`FUNC OFF -> CALLEE 0`) are compared by caller-callee pair.

With --callgrind TESTED.cg EXACT.cg (callgrind --collect-jumps=yes of the
two optimised binaries) it also lists the functions whose taken branches
differ most between them: where the missing gain is, measured.

Usage: compare_fdata.py BINARY TESTED.fdata EXACT.fdata [--callgrind T.cg E.cg] [--top N]
"""
import argparse
import collections
import re
import subprocess
import sys


def read_fdata(path):
    """{(from_fn, from_off, to_fn, to_off): count} of branch records."""
    records = collections.Counter()
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 8 or parts[0] != "1" or parts[3] != "1":
                continue  # no_lbr header, memory or sample records
            records[(parts[1], int(parts[2], 16), parts[4], int(parts[5], 16))] += int(parts[7])
    return records


def bolt_names(binary):
    """{bolt name: start address}: a local function is name/N, N counting the
    local symbols of that name in address order (BOLT's NameResolver)."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    local = collections.defaultdict(list)
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] not in "tTwW":
            continue
        address, kind, name = int(parts[0], 16), parts[1], parts[2]
        if kind == "t":
            local[name].append(address)
        else:
            names[name] = address
    for name, starts in local.items():
        for n, start in enumerate(sorted(starts), 1):
            names[f"{name}/{n}"] = start
    return names


INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")


def conditional_jumps(binary):
    """{address: (taken target, fall-through address)} of every jcc."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True,
                         check=True).stdout
    jumps = {}
    pending = None  # (address, target) of a jcc waiting for the next address
    for line in out.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        address = int(m.group(1), 16)
        if pending is not None:
            jumps[pending[0]] = (pending[1], address)
            pending = None
        mnemonic, operands = m.group(2), m.group(3)
        if mnemonic.startswith("j") and mnemonic != "jmp":
            target = operands.split()[0] if operands else ""
            try:
                pending = (address, int(target, 16))
            except ValueError:
                pass
    return jumps


def split(records):
    """Intra-function records by function, and call records by (caller, callee)."""
    intra = collections.defaultdict(dict)
    calls = collections.Counter()
    for (ff, fo, tf, to), c in records.items():
        if ff == tf and to != 0:
            intra[ff][(fo, to)] = intra[ff].get((fo, to), 0) + c
        else:
            calls[(ff, tf)] += c
    return intra, calls


def branch_sides(edges, start, jumps):
    """{offset: (taken, fall)} for the conditional jumps among a function's edges."""
    sides = {}
    for (fo, to), c in edges.items():
        j = jumps.get(start + fo)
        if j is None:
            continue
        t, f = sides.get(fo, (0, 0))
        if start + to == j[0]:
            t += c
        elif start + to == j[1]:
            f += c
        sides[fo] = (t, f)
    return sides


def callgrind_taken(path):
    """{function: taken branches} from a callgrind --collect-jumps=yes file;
    BOLT's and GCC's split-off parts (name.cold, name.cold.0) and callgrind's
    recursion levels (name'2) folded into their function."""
    names = {}
    taken = collections.Counter()
    fn = "?"
    with open(path) as f:
        for line in f:
            # Names are compressed, "(id) name" the first time an id appears
            # in any of fn=, cfn= or jfn= and "(id)" after.
            m = re.match(r"(c|j)?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m and m.group(3) is not None:
                names[m.group(2)] = m.group(3)
            if line.startswith("fn="):
                fn = names.get(m.group(2), "?") if m else line[3:].strip()
                fn = re.sub(r"'\d+$", "", fn)
                fn = re.sub(r"\.cold(\.\d+)?$", "", fn)
            elif line.startswith("jump="):
                taken[fn] += int(line[5:].split()[0])
            elif line.startswith("jcnd="):
                taken[fn] += int(line[5:].split("/")[0])
    return taken


def pct(x, total):
    return f"{100 * x / total:.1f}%" if total else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("tested")
    ap.add_argument("exact")
    ap.add_argument("--callgrind", nargs=2, metavar=("TESTED_CG", "EXACT_CG"))
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()

    starts = bolt_names(args.binary)
    jumps = conditional_jumps(args.binary)
    t_intra, t_calls = split(read_fdata(args.tested))
    x_intra, x_calls = split(read_fdata(args.exact))

    stakes = collections.Counter()  # category -> sum |taken - fall| of exact
    by_function = collections.defaultdict(collections.Counter)
    worst = []  # (stake, function, offset, exact sides, tested sides, category)
    unknown = 0
    for fn, edges in x_intra.items():
        if fn not in starts:
            unknown += 1
            continue
        start = starts[fn]
        x_sides = branch_sides(edges, start, jumps)
        t_sides = branch_sides(t_intra.get(fn, {}), start, jumps)
        x_norm = max((t + f for t, f in x_sides.values()), default=0) or 1
        t_norm = max((t + f for t, f in t_sides.values()), default=0) or 1
        for off, (xt, xf) in x_sides.items():
            stake = abs(xt - xf)
            if stake == 0:
                continue
            if fn not in t_intra:
                cat = "no function"
            elif off not in t_sides or sum(t_sides[off]) == 0:
                cat = "no branch"
            else:
                tt, tf = t_sides[off]
                cat = "agrees" if (tt > tf) == (xt > xf) and tt != tf else "disagrees"
            stakes[cat] += stake
            by_function[fn][cat] += stake
            if cat != "agrees":
                tt, tf = t_sides.get(off, (0, 0))
                worst.append((stake, fn, off, (xt / x_norm, xf / x_norm), (tt / t_norm, tf / t_norm), cat))

    total = sum(stakes.values())
    print(f"# conditional branches of the exact profile, weighed by |taken - fall-through| (total {total:,})")
    print("| category | stake | share |")
    print("|---|---|---|")
    for cat in ("agrees", "disagrees", "no branch", "no function"):
        print(f"| {cat} | {stakes[cat]:,} | {pct(stakes[cat], total)} |")
    if unknown:
        print(f"# {unknown} functions of the exact profile are not symbols of {args.binary}")

    print(f"\n# functions by stake the tested profile gets wrong (top {args.top})")
    print("| function | wrong | disagrees | no branch | no function | agrees |")
    print("|---|---|---|---|---|---|")
    ranked = sorted(by_function.items(), key=lambda kv: -(sum(kv[1].values()) - kv[1]["agrees"]))
    for fn, c in ranked[:args.top]:
        wrong = sum(c.values()) - c["agrees"]
        print(f"| {fn} | {pct(wrong, total)} | {c['disagrees']:,} | {c['no branch']:,} | {c['no function']:,} | "
              f"{c['agrees']:,} |")

    print(f"\n# branches by stake (top {args.top}; sides normalised by the function's busiest branch)")
    print("| function+offset | stake | exact taken/fall | tested taken/fall | category |")
    print("|---|---|---|---|---|")
    for stake, fn, off, (xt, xf), (tt, tf), cat in sorted(worst, reverse=True)[:args.top]:
        print(f"| {fn}+{off:#x} | {pct(stake, total)} | {xt:.3f}/{xf:.3f} | {tt:.3f}/{tf:.3f} | {cat} |")

    # Records from sites that are not conditional jumps: unconditional and
    # indirect jumps (a switch's table) and fall-throughs out of blocks that
    # end without a jump (which BOLT infers where a profile leaves them out).
    other_x = collections.Counter()
    other_t = collections.Counter()
    for intra, other in ((x_intra, other_x), (t_intra, other_t)):
        for fn, edges in intra.items():
            start = starts.get(fn)
            for (fo, to), c in edges.items():
                if start is not None and start + fo not in jumps:
                    other[fn] += c
    print(f"\n# records from other sites (jumps, switch tables, fall-throughs): exact {sum(other_x.values()):,}, "
          f"tested {sum(other_t.values()):,}")
    print("| function | exact | tested |")
    print("|---|---|---|")
    for fn, c in other_x.most_common(min(args.top, 5)):
        print(f"| {fn} | {c:,} | {other_t.get(fn, 0):,} |")

    x_total = sum(x_calls.values())
    missing = sum(c for k, c in x_calls.items() if k not in t_calls)
    print(f"\n# call edges: exact {len(x_calls)} caller-callee pairs ({x_total:,} calls), tested {len(t_calls)}")
    print(f"# exact's calls on pairs the tested profile lacks: {missing:,} ({pct(missing, x_total)})")
    print("| caller -> callee | exact calls | share | tested |")
    print("|---|---|---|---|")
    for (a, b), c in x_calls.most_common(args.top):
        print(f"| {a} -> {b} | {c:,} | {pct(c, x_total)} | {t_calls.get((a, b), 0):,} |")

    if args.callgrind:
        t_cg = callgrind_taken(args.callgrind[0])
        x_cg = callgrind_taken(args.callgrind[1])
        gap = {fn: t_cg.get(fn, 0) - x_cg.get(fn, 0) for fn in set(t_cg) | set(x_cg)}
        total_gap = sum(gap.values())
        print(f"\n# taken branches measured (callgrind): tested {sum(t_cg.values()):,}, exact {sum(x_cg.values()):,}, "
              f"gap {total_gap:,}")
        print("| function | tested | exact | gap | share of gap |")
        print("|---|---|---|---|---|")
        for fn, g in sorted(gap.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"| {fn} | {t_cg.get(fn, 0):,} | {x_cg.get(fn, 0):,} | {g:,} | {pct(g, total_gap)} |")


if __name__ == "__main__":
    sys.exit(main())
