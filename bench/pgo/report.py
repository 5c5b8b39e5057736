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
Then each further build against the first compared one (ecpi's profile):
the median over rounds of (ecpi - build) / plain, so that two builds' shares
whose intervals overlap can still be told apart within the rounds.
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


def print_differences(program, rounds, optimized):
    base = optimized[0]
    cells = []
    for v in optimized[1:]:
        mid, low, high = difference(rounds, base, v)
        cells.append(f"{v} {mid:+.1%} [{low:+.1%}, {high:+.1%}]")
    if cells:
        print(f"# {program}: gain over {base} (of plain's time, paired): " + ", ".join(cells))


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


if __name__ == "__main__":
    main()
