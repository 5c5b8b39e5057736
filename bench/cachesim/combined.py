#!/usr/bin/env python3
"""The combined mode's tables (bench/cachesim.sh combined): per program and
level, the default settings against full simulation (worst of the seeds),
then the simulation time. Arguments: OUT PROGRAM..."""
import json
import os
import statistics
import sys

out, programs = sys.argv[1], sys.argv[2:]
seeds = int(os.environ.get("SEEDS", "5"))
TARGET = 0.3  # points


def pp(x):
    return f"{100 * x:.3f}"


def mark(err):
    s = f"{100 * err:.3f}"
    return f"**{s}**" if 100 * err > TARGET else s


print(f"| program | level | method (sets) | full miss rate, local / global | worst error, local | worst error, global | "
      f"bound held | median bound | median set spread |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
met = {"local": 0, "global": 0, "levels": 0}
for p in programs:
    full = json.load(open(f"{out}/{p}.full.json"))
    runs = []
    for s in range(1, seeds + 1):
        path = f"{out}/{p}.d{s}.json"
        if os.path.exists(path):
            runs.append(json.load(open(path)))
    if not runs:
        continue
    for i, fl in enumerate(full["levels"]):
        ls = [r["levels"][i] for r in runs]
        el = max(abs(l["miss_rate"] - fl["miss_rate"]) for l in ls)
        eg = max(abs(l["global_miss_rate"] - fl["global_miss_rate"]) for l in ls)
        held = sum(abs(l["miss_rate"] - fl["miss_rate"]) <= l["bound"] for l in ls)
        bound = statistics.median(l["bound"] for l in ls)
        spreads = [l.get("set_spread") for l in ls if isinstance(l.get("set_spread"), (int, float))]
        spread = f"±{pp(statistics.median(spreads))}" if spreads and ls[0].get("method") == "sets" else ""
        method = ls[0].get("method", "?")
        if method == "sets":
            method += f" 1/{runs[0]['sampling']['set_sample']} ({ls[0].get('sampled_sets', '?')})"
        met["levels"] += 1
        met["local"] += 100 * el <= TARGET
        met["global"] += 100 * eg <= TARGET
        print(f"| {p if i == 0 else ''} | {fl['name']} | {method} | {pp(fl['miss_rate'])}% / {pp(fl['global_miss_rate'])}% | "
              f"{mark(el)} | {mark(eg)} | {held}/{len(ls)} | ±{pp(bound)} | {spread} |")
print(f"\nWithin {TARGET} points: local {met['local']} of {met['levels']} program-levels, global {met['global']} of {met['levels']}.\n")

# The set-sampled levels' estimators side by side from the same runs: the
# report's (set_estimator) and the sampled groups' own ratio, their misses
# over their references (the report's estimate before issue 32's "Which
# estimator"; the set simulator's counts, which have no unknown references).
print("| program | level | estimator (seeds) | median slope / ratio | worst error, local: report | groups' ratio |")
print("|---|---|---|---:|---:|---:|")
for p in programs:
    full = json.load(open(f"{out}/{p}.full.json"))
    runs = [json.load(open(f"{out}/{p}.d{s}.json")) for s in range(1, seeds + 1) if os.path.exists(f"{out}/{p}.d{s}.json")]
    for i, fl in enumerate(full["levels"]):
        ls = [r["levels"][i] for r in runs]
        if not ls or "set_estimator" not in ls[0]:
            continue
        ratios = [(l["known_misses"] + l["unknown_stale_misses"]) / l["simulated_references"] for l in ls if l["simulated_references"]]
        kinds = sorted({l["set_estimator"] for l in ls})
        n_reg = sum(l["set_estimator"] == "regression" for l in ls)
        slope = statistics.median(l["set_slope"] / r if r else 1 for l, r in zip(ls, ratios))
        er = max(abs(l["miss_rate"] - fl["miss_rate"]) for l in ls)
        eq = max(abs(r - fl["miss_rate"]) for r in ratios) if ratios else float("nan")
        print(f"| {p} | {fl['name']} | {'/'.join(kinds)} ({n_reg} regression) | {slope:.2f} | {mark(er)} | {mark(eq)} |")
print()

print("| program | alone | built with ecpi's flags, uncontrolled | full simulation | default | time sampling only | "
      "simulation time: full / default | full / time only | default / alone | references simulated: in windows / in sampled sets |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for p in programs:
    path = f"{out}/{p}.times"
    if not os.path.exists(path):
        continue
    rows = {}
    for line in open(path):
        c, t = line.rsplit(" ", 1)
        rows.setdefault(c, []).append(float(t))
    m = {c: statistics.median(v) for c, v in rows.items()}
    unc = m["uncontrolled"]
    sim_full, sim_def = m["full"] - unc, m["default"] - unc
    ratio = f"{sim_full / sim_def:.1f}x" if sim_def > 0 else "n/a (default within the program's own time)"
    sim_time = m.get("time-only", 0) - unc
    ratio_time = f"{sim_full / sim_time:.1f}x" if sim_time > 0 else "n/a"
    d1 = json.load(open(f"{out}/{p}.d1.json"))
    time_share = d1["sampling"]["fraction"]
    set_share = d1["sampling"].get("set_simulated", 0) / max(1, d1["sampling"]["references"])
    print(f"| {p} | {m['alone']:.3f} s | {unc:.3f} s | {m['full']:.3f} s | {m['default']:.3f} s | {m.get('time-only', 0):.3f} s | {ratio} | {ratio_time} | "
          f"{m['default'] / m['alone']:.2f}x | {100 * time_share:.1f}% / {100 * set_share:.1f}% |")
    if "base default" in m:
        # BASELINE: the other ecpi's default run, its simulation time against its own build's uncontrolled run
        # (and against its own full simulation when CPU=1 timed that too).
        sim_base = m["base default"] - m["base uncontrolled"]
        base_full = m.get("base full", m["base uncontrolled"] + sim_full) - m["base uncontrolled"]
        ratio_base = f"{base_full / sim_base:.1f}x" if sim_base > 0 else "n/a"
        full_text = f"{m['base full']:.3f} s" if "base full" in m else ""
        print(f"| {p} (BASELINE) |  | {m['base uncontrolled']:.3f} s | {full_text} | {m['base default']:.3f} s |  | {ratio_base} |  | "
              f"{m['base default'] / m['alone']:.2f}x |  |")

# CPU=1: ecpi's own CPU time per run (perf stat --no-inherit: not the program's).
cpu_programs = [p for p in programs if os.path.exists(f"{out}/{p}.cpu")]
if cpu_programs:
    print()
    print("| program | run | ecpi's own CPU, median (q1-q3) ms | rounds | against BASELINE's: lower in |")
    print("|---|---|---:|---:|---:|")
for p in cpu_programs:
    runs = {}
    for line in open(f"{out}/{p}.cpu"):
        c, ms = line.rsplit(" ", 1)
        runs.setdefault(c, []).append(float(ms))
    for c, v in runs.items():
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0], v[0], v[0]]
        base = runs.get("base " + c)
        lower = f"{sum(a < b for a, b in zip(v, base))} of {min(len(v), len(base))}" if base else ""
        print(f"| {p} | {c} | {statistics.median(v):.1f} ({q[0]:.1f}-{q[2]:.1f}) | {len(v)} | {lower} |")
