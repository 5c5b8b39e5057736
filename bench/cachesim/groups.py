#!/usr/bin/env python3
"""Scores choices of sampled set groups (bench/cachesim.sh groups).

Input: OUT/PROGRAM.groups.tsv from ecpi_bench_set_groups (each group's
references and misses per level, from one full trace). A group's simulation
depends on its own lines only (MemSpy 7.3, whole groups of sets), so a choice
of groups estimates a level's local miss rate as the sum of its groups'
misses over the sum of their references, exactly what a run with that choice
reports (the ratio estimator). The default's regression estimator (issue
32, docs/CACHESIM.md "Which estimator": set_regression_estimate) takes the
level's references over all sets from the windows and only the slope of
misses on references, within [0, ratio], from the groups; here those
references are the full trace's, exact (the windows' own error adds
(ratio - slope) times theirs). For each way of choosing and each program: the largest error of
any choice the scheme can make, the median and the 95th percentile of the
worst of SEEDS seeds (drawn 2,000 times), and the share of the program's
references the chosen groups take (the simulation's work outside windows).
"""
import itertools
import os
import random
import statistics
import sys

GROUPS = 64


def read(path):
    rows = {}
    for line in open(path):
        f = line.split('\t')
        if f[0] == 'group':
            continue
        rows.setdefault(f[1], [None] * GROUPS)[int(f[0])] = (int(f[2]), int(f[3]))
    return rows


def schemes(keep):
    """name -> (list of every choice, or None, with a drawing function, and the estimator)."""
    stride = GROUPS // keep
    return {
        'random (any K of 64)': (None, lambda r: r.sample(range(GROUPS), keep), ratio),
        'one per block of consecutive groups': (None, lambda r: [b * stride + r.randrange(stride) for b in range(keep)], ratio),
        'one per residue mod K': (None, lambda r: [r.randrange(stride) * keep + b for b in range(keep)], ratio),
        'one per residue, balanced, ratio estimator': (None, lambda r: balanced(r, keep, stride), ratio),
        'one per residue, balanced, regression (the default)': (None, lambda r: balanced(r, keep, stride), regression),
        'evenly spaced (g, g+64/K, ...)': ([[g + i * stride for i in range(keep)] for g in range(stride)], None, ratio),
        'contiguous block': ([[b * keep + i for i in range(keep)] for b in range(stride)], None, ratio),
    }


def balanced(rng, keep, stride):
    """One group per residue mod K, each bit of the high part (group // K)
    set in half of the K groups (analyze/cachesim's balanced_high_bits)."""
    high = [0] * keep
    bit = 1
    while bit < stride:
        half = [1] * (keep // 2) + [0] * (keep - keep // 2) if keep > 1 else [rng.randrange(2)]
        rng.shuffle(half)
        for i in range(keep):
            high[i] |= bit if half[i] else 0
        bit <<= 1
    return [high[b] * keep + b for b in range(keep)]


def ratio(level, choice):
    refs = sum(level[g][0] for g in choice)
    misses = sum(level[g][1] for g in choice)
    return 100.0 * misses / refs if refs else 100.0


def regression(level, choice):
    """The choice's misses, the slope of misses on references over its
    groups (within [0, ratio]) and every group's references."""
    n = [level[g][0] for g in choice]
    m = [level[g][1] for g in choice]
    if sum(n) == 0:
        return 100.0
    r = sum(m) / sum(n)
    mean_n, mean_m = sum(n) / len(n), sum(m) / len(m)
    sxx = sum((x - mean_n) ** 2 for x in n)
    sxy = sum((x - mean_n) * (y - mean_m) for x, y in zip(n, m))
    slope = min(max(sxy / sxx, 0.0), r) if sxx > 0 else r
    total = sum(refs for refs, _ in level)
    keep = len(level) // len(choice)
    return 100.0 * (keep * sum(m) + slope * (total - keep * sum(n))) / total


def score(level, l1, choices, draw, estimator, seeds, rng):
    full = 100.0 * sum(m for _, m in level) / sum(r for r, _ in level)
    total = sum(r for r, _ in l1)
    if choices is None:
        choices = [draw(rng) for _ in range(4000)]
    errs = [abs(estimator(level, c) - full) for c in choices]
    shares = [sum(l1[g][0] for g in c) / total for c in choices]
    worst = sorted(max(rng.choice(errs) for _ in range(seeds)) for _ in range(2000))
    return max(errs), worst[len(worst) // 2], worst[int(len(worst) * 0.95)], sum(e <= 0.3 for e in errs) / len(errs), max(shares)


def main():
    out, programs = sys.argv[1], sys.argv[2:]
    seeds = int(os.environ.get('SEEDS', '5'))
    level_name = os.environ.get('LEVEL', 'L2')
    rng = random.Random(1)
    for keep in (4, 8, 16):
        print(f"\n#### 1/{GROUPS // keep} of the sets ({keep} of {GROUPS} groups), {level_name} local rate, worst of {seeds} seeds\n")
        print("| program | choice | largest error of any choice | median worst | 95th pct worst | choices within 0.3 | largest share of references |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for p in programs:
            rows = read(os.path.join(out, p + '.groups.tsv'))
            level, l1 = rows[level_name], rows[next(iter(rows))]
            for i, (name, (choices, draw, estimator)) in enumerate(schemes(keep).items()):
                mx, med, p95, within, share = score(level, l1, choices, draw, estimator, seeds, rng)
                print(f"| {p if i == 0 else ''} | {name} | {mx:.3f} | {med:.3f} | {p95:.3f} | {100 * within:.0f}% | {100 * share:.1f}% |")


if __name__ == '__main__':
    main()
