#!/usr/bin/env python3
"""Tables for bench/cachesim.sh from the JSON reports and cachegrind files it
leaves in one directory (OUT):

  OUT/<prog>.full.json             ecpi cachesim --sample 1/1
  OUT/<prog>.s<seed>.json          ecpi cachesim --sample 1/10 --seed <seed>
  OUT/<prog>.cg, <prog>.cgsrc      cachegrind's out file, the program's own source files
  OUT/<prog>.times                 "config seconds" lines (timed runs)
  OUT/<prog>.t.<config>.json       the report of the first timed run of each config

Usage: tables.py OUT PROG... (prints Markdown tables)
"""
import json
import os
import re
import statistics
import sys

OUT = sys.argv[1]
PROGS = sys.argv[2:]


def load(name):
    with open(os.path.join(OUT, name)) as f:
        return json.load(f)


def exists(name):
    return os.path.exists(os.path.join(OUT, name))


def cachegrind_d1(prog):
    """(D1 misses of the whole run, D1 misses at the program's own source lines)."""
    own_files = set(open(os.path.join(OUT, prog + ".cgsrc")).read().split())
    events, total, own, in_own = None, 0, 0, False
    for line in open(os.path.join(OUT, prog + ".cg")):
        if line.startswith("events:"):
            events = line.split()[1:]
            d1 = [events.index("D1mr"), events.index("D1mw")]
        elif line.startswith("fl="):
            in_own = os.path.basename(line[3:].strip()) in own_files
        elif line[:1].isdigit() and events:
            counts = line.split()[1:]
            misses = sum(int(counts[i]) for i in d1 if i < len(counts))
            total += misses
            if in_own:
                own += misses
    return total, own


def pct(x, digits=3):
    return f"{100 * x:.{digits}f}%"


def signed_pct(x, digits=1):
    return f"{100 * x:+.{digits}f}%"


def norm(name):
    # Stacks are named by thread id, which differs between runs.
    return re.sub(r"stack of thread \d+", "stack", name)


def top(rows, key, min_share=5.0, limit=5):
    return [norm(r[key]) for r in rows if r["share"] >= min_share][:limit]


def table_cachegrind():
    print("| program | references | ecpi L1d misses | cachegrind D1 misses | difference | cachegrind D1 misses in the program's own code | difference |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for p in PROGS:
        if not exists(p + ".cg"):
            continue
        d = load(p + ".full.json")
        ours = d["levels"][0]["misses"]
        total, own = cachegrind_d1(p)
        print(f"| {p} | {d['levels'][0]['references']:,} | {ours:,} | {total:,} | {signed_pct(ours / total - 1)} | {own:,} | {signed_pct(ours / own - 1)} |")


def seeds_of(p):
    return sorted(f for f in os.listdir(OUT) if re.fullmatch(re.escape(p) + r"\.s\d+\.json", f))


def table_sampled():
    print("| program | level | full miss rate (local / global) | 1/10: max abs error, local | mean error, local | max abs error, global | bound held | median bound | windows | top procedures same | top objects same |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in PROGS:
        full = load(p + ".full.json")
        runs = [load(f) for f in seeds_of(p)]
        if not runs:
            continue
        want_procs = top(full["procedures"], "procedure")
        want_objs = top(full["objects"], "name")
        same_procs = sum(top(r["procedures"], "procedure", 0, len(want_procs)) == want_procs for r in runs)
        same_objs = sum([norm(o["name"]) for o in r["objects"][: len(want_objs)]] == want_objs for r in runs)
        windows = statistics.median(r["sampling"]["windows"] for r in runs)
        for i, fl in enumerate(full["levels"]):
            local = [r["levels"][i]["miss_rate"] - fl["miss_rate"] for r in runs]
            glob = [r["levels"][i]["global_miss_rate"] - fl["global_miss_rate"] for r in runs]
            held = sum(abs(e) <= r["levels"][i]["bound"] for e, r in zip(local, runs))
            first = i == 0
            print(f"| {p if first else ''} | {fl['name']} | {pct(fl['miss_rate'])} / {pct(fl['global_miss_rate'])} | "
                  f"{100 * max(map(abs, local)):.3f} pp | {100 * statistics.mean(local):+.3f} pp | {100 * max(map(abs, glob)):.3f} pp | "
                  f"{held}/{len(runs)} | ±{100 * statistics.median(r['levels'][i]['bound'] for r in runs):.3f} pp | {windows:.0f} | "
                  + (f"{same_procs}/{len(runs)} (top {len(want_procs)}) | {same_objs}/{len(runs)} (top {len(want_objs)}) |" if first else " | |"))


CONFIGS = ["alone", "uncontrolled", "1/1", "1/10", "1/100", "1/1+sets", "1/10+sets", "1/100+sets"]


def times_of(p):
    t = {}
    if not exists(p + ".times"):
        return t
    for line in open(os.path.join(OUT, p + ".times")):
        c, s = line.split()
        t.setdefault(c, []).append(float(s))
    return {c: statistics.median(v) for c, v in t.items()}


def table_speed(sets_label):
    print(f"| program | alone | built with ecpi's flags, not simulated | 1/1 | 1/10 | 1/100 | 1/1, {sets_label} | 1/10, {sets_label} | 1/100, {sets_label} | 1/1 ÷ 1/10 | 1/10 ÷ alone |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in PROGS:
        t = times_of(p)
        if not t:
            continue
        cells = [f"{t[c]:.2f} s" if c in t else "-" for c in CONFIGS]
        ratio = f"{t['1/1'] / t['1/10']:.1f}x" if "1/1" in t and "1/10" in t else "-"
        slow = f"{t['1/10'] / t['alone']:.1f}x" if "alone" in t and "1/10" in t else "-"
        print(f"| {p} | " + " | ".join(cells) + f" | {ratio} | {slow} |")


def table_speed_error():
    print("| program | level | 1/1 | 1/10 | 1/100 | 1/1, sets | 1/10, sets | 1/100, sets |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for p in PROGS:
        full = load(p + ".full.json")
        for i, fl in enumerate(full["levels"]):
            cells = []
            for c in CONFIGS[2:]:
                name = f"{p}.t.{c.replace('/', '_')}.json"
                if not exists(name):
                    cells.append("-")
                    continue
                l = load(name)["levels"][i]
                cells.append(f"{100 * (l['miss_rate'] - fl['miss_rate']):+.3f} ± {100 * l['bound']:.3f} pp")
            print(f"| {p if i == 0 else ''} | {fl['name']} | " + " | ".join(cells) + " |")


def table_windows():
    print("| program | window | windows (median) | L1d: max abs error | L2: max abs error, local | L2: max abs error, global | L2 references of unknown outcome (median) | L2 bound held |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in PROGS:
        if not exists(f"{p}.w10000.s1.json"):
            continue
        full = load(p + ".full.json")
        for w, pattern in ((10000, r"\.w10000\.s\d+\.json"), (100000, r"\.s\d+\.json"), (1000000, r"\.w1000000\.s\d+\.json")):
            names = sorted(f for f in os.listdir(OUT) if re.fullmatch(re.escape(p) + pattern, f))
            if w == 100000:
                names = names[:5]  # the first five seeds, as for the other lengths
            runs = [load(f) for f in names]
            if not runs:
                continue
            err = lambda i, key: max(abs(r["levels"][i][key] - full["levels"][i][key]) for r in runs)
            unknown = statistics.median(r["levels"][1]["unknown"] / max(1, r["levels"][1]["simulated_references"]) for r in runs)
            held = sum(abs(r["levels"][1]["miss_rate"] - full["levels"][1]["miss_rate"]) <= r["levels"][1]["bound"] for r in runs)
            print(f"| {p} | {w:,} | {statistics.median(r['sampling']['windows'] for r in runs):.0f} | {100 * err(0, 'miss_rate'):.3f} pp | "
                  f"{100 * err(1, 'miss_rate'):.3f} pp | {100 * err(1, 'global_miss_rate'):.3f} pp | {100 * unknown:.0f}% | {held}/{len(runs)} |")


section = os.environ.get("TABLE", "all")
if section in ("all", "cachegrind"):
    print("\n### Full simulation against cachegrind (L1d misses)\n")
    table_cachegrind()
if section in ("all", "sampled"):
    print(f"\n### Sampled (1/10) against full simulation, {os.environ.get('SEEDS', 10)} seeds\n")
    table_sampled()
if section in ("all", "windows"):
    print("\n### Window length at 1/10 (5 seeds each)\n")
    table_windows()
if section in ("all", "speed"):
    print("\n### Wall time (median)\n")
    table_speed(os.environ.get("SETS_LABEL", "sets 1/8"))
    print("\n### Error of the timed runs (miss rate - full simulation's, ± reported bound; local rates)\n")
    table_speed_error()
