"""bench/paths.sh ablation: issue 31's three paths, fitted and stamped means
against what removing each path from the plain program saves.

Reads from OUT: ablation.times ("CONFIG LOOP_SECONDS": whole, no_a, no_b,
no_c, none, inline_idle, inline_1/10, stamped_1/10) and
ablation_{inline,stamped}_<seed>.json (ecpi paths --branch --procedure poll).
A path is told by the line of poll() its work is on (CHANNELS_SOURCE)."""
import json
import os
import statistics

TURNS_PER_ROUND = 6
SHARE = {"A": 4, "B": 1, "C": 1}  # occurrences per round of six turns
MARK = {"A": "fold_sample(p,", "B": "look_up_device(p);", "C": "p->heartbeats++;"}
REMOVED = {"A": "no_a", "B": "no_b", "C": "no_c"}


def marked_lines(source):
    out = {}
    for n, line in enumerate(open(source), 1):
        for k, mark in MARK.items():
            if mark in line and "static" not in line:
                out[k] = n
    return out


ALONE = {"A": "only_a", "B": "only_b", "C": "only_c"}


def truth(times, rounds):
    """ns per occurrence: what removing the path saves, plus its share of the loop (all removed)."""
    med = {k: statistics.median(float(v[0]) for v in vals) for k, vals in times.items()}
    turns = rounds * TURNS_PER_ROUND
    loop = med["none"] * 1e9 / turns
    out = {}
    for k in SHARE:
        n = rounds * SHARE[k]
        out[k] = (med["whole"] - med[REMOVED[k]]) * 1e9 / n + loop
    return out, med, loop


def truth_alone(med, rounds, loop):
    """ns per occurrence by the other design: what the path's work alone adds to the
    loop with all three removed, plus its share of the loop; None without those builds."""
    if not all(v in med for v in ALONE.values()):
        return None
    return {k: (med[ALONE[k]] - med["none"]) * 1e9 / (rounds * SHARE[k]) + loop for k in SHARE}


ADDED = {"A": "plus_a", "B": "plus_b", "C": "plus_c"}


def truth_added(med, rounds):
    """ns per occurrence by the third design: what one more turn of the path in
    each round adds to the whole program (its own turn of loop control
    included); None without those builds."""
    if not all(v in med for v in ADDED.values()):
        return None
    return {k: (med[ADDED[k]] - med["whole"]) * 1e9 / rounds for k in SHARE}


def paths_of(doc, lines):
    """{A|B|C: path} by the line each path's work is on."""
    out = {}
    for k, line in lines.items():
        cands = [p for p in doc["paths"] if any(l["line"] == line for l in p["lines"])]
        if cands:
            out[k] = max(cands, key=lambda p: p.get("fit", {}).get("span_occurrences", 0) + p["occurrences"])
    return out


def mean_of(p, fitted):
    if fitted and p.get("fit", {}).get("fitted"):
        return p["fit"]["mean_ns"], p["fit"]["relative_error"]
    return p["mean_ns"], None


def part_ablation(out_dir, load, times):
    rounds = int(os.environ.get("CHANNEL_ROUNDS", "2000000"))
    t = times("ablation.times")
    ablated, med, loop = truth(t, rounds)
    lines = marked_lines(os.environ["CHANNELS_SOURCE"])
    n_rounds = len(t["whole"])
    print(f"### Three paths against ablation (tests/testprogs/paths/channels.c, {rounds} rounds, "
          f"{n_rounds} interleaved rounds, medians)\n")
    print("| path | ablated ns | fitted ns (seeds 1-5) | fit error | ± (stderr) | stamped ns (today) | stamped error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    first = {"inline": 0, "stamped": 0}
    per = {k: {"inline": [], "stamped": [], "se": []} for k in SHARE}
    seeds = 0
    for seed in range(1, 6):
        name = lambda kind: os.path.join(out_dir, f"ablation_{kind}_{seed}.json")
        if not os.path.exists(name("inline")):
            continue
        seeds += 1
        for kind in ("inline", "stamped"):
            doc = load(f"ablation_{kind}_{seed}.json")
            ps = paths_of(doc, lines)
            if set(ps) != set(SHARE):
                continue
            for k, p in ps.items():
                m, se = mean_of(p, kind == "inline")
                per[k][kind].append(m)
                if se is not None:
                    per[k]["se"].append(se)
            if ps["A"]["rank_by_time"] < ps["B"]["rank_by_time"] and ps["A"]["rank_by_time"] == min(
                    p["rank_by_time"] for p in ps.values()):
                first[kind] += 1
    for k in SHARE:
        truth_ns = ablated[k]
        f, s = per[k]["inline"], per[k]["stamped"]
        fm = statistics.median(f) if f else float("nan")
        sm = statistics.median(s) if s else float("nan")
        worst = max((abs(x - truth_ns) / truth_ns for x in f), default=float("nan"))
        print(f"| {k} | {truth_ns:.1f} | {fm:.1f} ({min(f, default=0):.1f}-{max(f, default=0):.1f}) | "
              f"{100 * (fm - truth_ns) / truth_ns:+.0f}% (worst {100 * worst:.0f}%) | "
              f"{100 * statistics.median(per[k]['se']) if per[k]['se'] else float('nan'):.1f}% | "
              f"{sm:.1f} | {100 * (sm - truth_ns) / truth_ns:+.0f}% |")
    alone = truth_alone(med, rounds, loop)
    added = truth_added(med, rounds)
    if alone:
        nan = {k: float("nan") for k in SHARE}
        added_or = added or nan
        print("\n| path | removed from the whole | alone in the loop | one more in the mix | fitted | "
              "fit vs removed | fit vs alone | fit vs one more |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for k in SHARE:
            fm = statistics.median(per[k]["inline"]) if per[k]["inline"] else float("nan")
            err = lambda t: f"{100 * (fm - t) / t:+.0f}%"
            print(f"| {k} | {ablated[k]:.1f} | {alone[k]:.1f} | {added_or[k]:.1f} | {fm:.1f} | "
                  f"{err(ablated[k])} | {err(alone[k])} | {err(added_or[k])} |")
        turn = med["whole"] * 1e9 / (rounds * TURNS_PER_ROUND)
        print(f"\nA round of six turns: the whole program {6 * turn:.1f} ns; the ablated means add up to "
              f"{sum(SHARE[k] * ablated[k] for k in SHARE):.1f} (removed), {sum(SHARE[k] * alone[k] for k in SHARE):.1f} (alone)"
              f" and {sum(SHARE[k] * added_or[k] for k in SHARE):.1f} (one more).")
    print(f"\nA first by time: span fit in {first['inline']} of {seeds} seeds, stamps in {first['stamped']} of {seeds}. "
          f"Loop control (all three removed): {loop:.1f} ns per turn, included in each ablated figure. "
          f"A/B total time by ablation: {4 * ablated['A'] / ablated['B']:.2f}.\n")
    whole = med["whole"]
    print("| build | loop s (median) | x plain |\n|---|---:|---:|")
    for k in ("whole", "inline_idle", "inline_1/10", "stamped_1/10"):
        if k in med:
            print(f"| {k} | {med[k]:.3f} | {med[k] / whole:.3f} |")
    print()
