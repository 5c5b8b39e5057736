#!/usr/bin/env python3
"""The table of bench/pgo.sh (issue 33) from its timing rounds.

    report.py TIMES METRIC PROGRAM...

TIMES holds lines PROGRAM VARIANT WALL [CPU ROUND] (bench/pgo/rounds.py;
lines of three fields, from before rounds were named, pair by their order in
the file). METRIC is cpu or wall. Variants are plain, instr (clang's
instrumented PGO), then the builds compared with it (VARIANTS in the
environment). A round counts when it ran every variant.

Per program: each variant's median seconds; its paired gain, the median over
rounds of (plain - variant) / plain within the round; and its share of
instrumented PGO's gain, the ratio of the two paired gains. Each paired
figure comes with a 95% bootstrap interval (rounds resampled with
replacement, 4,000 times, a fixed seed: the same file gives the same table).
Then each further build against a reference build (REFERENCE in the
environment; default exact, the profile of exact counts, where it was timed,
else the first compared build): the median over rounds of
(reference - build) / plain, and the difference of the two shares computed
on the same resampled rounds, each with its 95% bootstrap interval; a build
is told apart from the reference when that interval leaves out 0. Last, the
shares per hold (a call of rounds.py: rounds named SEED-k share SEED), to
show how much a figure moves from one hold to the next.
"""
import collections
import os
import random
import statistics
import sys

RESAMPLES = 4000


def read_rounds(path, program, column, variants):
    """{round: {variant: seconds}} of the rounds that ran every variant."""
    rounds = collections.defaultdict(dict)
    seen = collections.Counter()
    for line in open(path):
        fields = line.split()
        if len(fields) < 3 or fields[0] != program:
            continue
        variant = fields[1]
        if len(fields) >= 5:
            key = fields[4]
        else:
            key = f"unnamed-{seen[variant]}"
            seen[variant] += 1
        if column < len(fields) and len(fields) >= 5:
            rounds[key][variant] = float(fields[column])
        elif column == 2:
            rounds[key][variant] = float(fields[2])
    for key, r in rounds.items():
        r["_round"] = key
    return [r for r in rounds.values() if all(v in r for v in variants)]


def paired(rounds, variant):
    return statistics.median((r["plain"] - r[variant]) / r["plain"] for r in rounds)


def figures(rounds, optimized):
    """Paired gains of instr and every optimized variant, and the shares."""
    gain = {v: paired(rounds, v) for v in ["instr"] + optimized}
    share = {v: gain[v] / gain["instr"] if gain["instr"] else float("nan") for v in optimized}
    return gain, share


def intervals(rounds, optimized):
    """95% bootstrap intervals of figures()' gains and shares."""
    rng = random.Random(33)
    gains = collections.defaultdict(list)
    shares = collections.defaultdict(list)
    for _ in range(RESAMPLES):
        sample = [rounds[rng.randrange(len(rounds))] for _ in rounds]
        gain, share = figures(sample, optimized)
        for v, g in gain.items():
            gains[v].append(g)
        for v, s in share.items():
            shares[v].append(s)

    def bounds(values):
        values = sorted(x for x in values if x == x)
        if not values:
            return float("nan"), float("nan")
        return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]
    return ({v: bounds(x) for v, x in gains.items()}, {v: bounds(x) for v, x in shares.items()})


def difference(rounds, base, variant):
    """Median over rounds of (base - variant) / plain, with its 95% bootstrap interval."""
    values = [(r[base] - r[variant]) / r["plain"] for r in rounds]
    rng = random.Random(33)
    medians = sorted(statistics.median(values[rng.randrange(len(values))] for _ in values)
                     for _ in range(RESAMPLES))
    return statistics.median(values), medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]


def share_difference(rounds, base, variant):
    """share(variant) - share(base) over the rounds, with its 95% bootstrap
    interval (both shares from the same resampled rounds, so that the noise
    of plain and instr they share cancels)."""
    def of(sample):
        gain, share = figures(sample, [base, variant])
        return share[variant] - share[base]
    rng = random.Random(33)
    values = sorted(x for x in (of([rounds[rng.randrange(len(rounds))] for _ in rounds])
                                for _ in range(RESAMPLES)) if x == x)
    if not values:
        return float("nan"), float("nan"), float("nan")
    return of(rounds), values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def reference_of(optimized):
    base = os.environ.get("REFERENCE") or ("exact" if "exact" in optimized else optimized[0])
    if base not in optimized:
        sys.exit(f"bench/pgo/report.py: REFERENCE={base} is not among VARIANTS' compared builds")
    return base


def print_differences(program, rounds, optimized):
    base = reference_of(optimized)
    cells = []
    for v in optimized:
        if v == base:
            continue
        mid, low, high = difference(rounds, base, v)
        smid, slow, shigh = share_difference(rounds, base, v)
        told = "told apart" if slow > 0 or shigh < 0 else "not told apart"
        cells.append(f"{v} {mid:+.1%} [{low:+.1%}, {high:+.1%}], share {smid:+.0%} [{slow:+.0%}, {shigh:+.0%}] "
                     f"({told})")
    if cells:
        print(f"# {program}: against {base}, gain (of plain's time, paired) and share: " + "; ".join(cells))


def print_holds(program, rounds, optimized):
    """The shares within each hold (rounds named SEED-k: one SEED per hold)."""
    holds = collections.defaultdict(list)
    for r in rounds:
        holds[r["_round"].rsplit("-", 1)[0]].append(r)
    if len(holds) < 2:
        return
    cells = []
    for name, held in sorted(holds.items()):
        if len(held) < 2:
            continue
        _, share = figures(held, optimized)
        cells.append(f"{name} ({len(held)}): " + " ".join(f"{v} {share[v]:.0%}" for v in optimized))
    print(f"# {program}: shares per hold: " + "; ".join(cells))


def main():
    path, metric = sys.argv[1:3]
    column = {"wall": 2, "cpu": 3}[metric]
    variants = os.environ.get("VARIANTS", "plain instr ecpi bolt daemon").split()
    optimized = variants[2:]
    print(f"# {metric} seconds; paired gain = median over rounds of (plain - build) / plain within a round; "
          "share = its gain / instrumented PGO's; [95% bootstrap interval over rounds]")
    print("| program | rounds | " + " | ".join(f"{v} median" for v in variants) + " | " +
          " | ".join(f"{v} paired gain" for v in variants[1:]) + " | " +
          " | ".join(f"share ({v})" for v in optimized) + " |")
    print("|" + "---|" * (2 + len(variants) + len(variants) - 1 + len(optimized)))
    differences = []
    for program in sys.argv[3:]:
        rounds = read_rounds(path, program, column, variants)
        if len(rounds) < 2:
            continue
        gain, share = figures(rounds, optimized)
        gain_ci, share_ci = intervals(rounds, optimized)
        medians = [f"{statistics.median(r[v] for r in rounds):.3f}" for v in variants]
        gains = [f"{gain[v]:+.1%} [{gain_ci[v][0]:+.1%}, {gain_ci[v][1]:+.1%}]" for v in variants[1:]]
        shares = [f"{share[v]:.0%} [{share_ci[v][0]:.0%}, {share_ci[v][1]:.0%}]" for v in optimized]
        print(f"| {program} | {len(rounds)} | " + " | ".join(medians + gains + shares) + " |")
        differences.append((program, rounds))
    for program, rounds in differences:
        print_differences(program, rounds, optimized)
        print_holds(program, rounds, optimized)


if __name__ == "__main__":
    main()
