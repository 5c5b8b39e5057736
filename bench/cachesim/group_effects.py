#!/usr/bin/env python3
"""What a choice of set groups can and cannot balance (issue 32, route b).

Input: OUT/PROGRAM.groups.tsv from `bench/cachesim.sh groups` (each of the
64 groups' L2 references and misses, from one full trace). The set choice
(analyze/cachesim: one group per residue mod K, every higher bit of the
group number set in half of the groups) balances the group number's bits;
with 4 groups (1/16) it has three contrasts to give them (bit 0, bit 1 and
their exclusive or), so each higher bit shares one, and an interaction of
two bits can land on the estimate in full. This prints, per program, the
spread of the groups' misses left after the accesses (the regression
estimator's residual), after the accesses and the six bits' main effects
(what balancing removes at best), and after the 15 pairwise interactions
too (what no 4-group choice balances), each as points of the L2's local
rate for one group and as the standard error of a K-group mean (finite
population corrected), and the largest effects on a group's local rate.
"""
import os
import statistics
import sys

GROUPS = 64


def read(path, level):
    rows = [None] * GROUPS
    for line in open(path):
        f = line.rstrip('\n').split('\t')
        if f[0] != 'group' and f[1] == level:
            rows[int(f[0])] = (float(f[2]), float(f[3]))
    return rows


def least_squares(x, y):
    """Coefficients of y on the columns of x (normal equations, Gauss-Jordan)."""
    n = len(x[0])
    a = [[sum(r[i] * r[j] for r in x) for j in range(n)] + [sum(r[i] * v for r, v in zip(x, y))] for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(a[r][i]))
        a[i], a[p] = a[p], a[i]
        for r in range(n):
            if r != i and a[i][i]:
                f = a[r][i] / a[i][i]
                a[r] = [u - f * v for u, v in zip(a[r], a[i])]
    return [a[i][n] / a[i][i] if a[i][i] else 0.0 for i in range(n)]


def residual_sd(columns, refs, misses):
    x = [columns(g) for g in range(GROUPS)]
    c = least_squares(x, misses)
    e = [m - sum(ci * xi for ci, xi in zip(c, r)) for m, r in zip(misses, x)]
    return (sum(v * v for v in e) / (GROUPS - len(x[0]))) ** 0.5


def bit(g, b):
    return (g >> b) & 1


def main():
    out, programs = sys.argv[1], sys.argv[2:]
    level = os.environ.get('LEVEL', 'L2')
    print(f"| program | residual after | spread of one group, points | standard error at 1/16 (4 groups) | at 1/8 (8 groups) |")
    print("|---|---|---:|---:|---:|")
    effects = {}
    for p in programs:
        rows = read(os.path.join(out, p + '.groups.tsv'), level)
        refs, misses = [r for r, _ in rows], [m for _, m in rows]
        mean_refs = statistics.mean(refs)
        models = {
            'the accesses (regression)': lambda g: [1, refs[g]],
            '+ the bits\' main effects': lambda g: [1, refs[g]] + [bit(g, b) for b in range(6)],
            '+ their pairwise interactions': lambda g: [1, refs[g]] + [bit(g, b) for b in range(6)] +
                                                     [bit(g, b) * bit(g, c) for b in range(6) for c in range(b + 1, 6)],
        }
        for i, (name, columns) in enumerate(models.items()):
            sd = 100.0 * residual_sd(columns, refs, misses) / mean_refs
            se = lambda k: sd / k ** 0.5 * (1 - k / GROUPS) ** 0.5
            print(f"| {p if i == 0 else ''} | {name} | {sd:.3f} | {se(4):.3f} | {se(8):.3f} |")
        rate = [100.0 * m / r for r, m in rows]
        eff = []
        for b in range(6):
            eff.append((statistics.mean(v for g, v in enumerate(rate) if bit(g, b)) - statistics.mean(v for g, v in enumerate(rate) if not bit(g, b)), f"bit {b}"))
            for c in range(b + 1, 6):
                same = [bit(g, b) == bit(g, c) for g in range(GROUPS)]
                eff.append((statistics.mean(v for g, v in enumerate(rate) if same[g]) - statistics.mean(v for g, v in enumerate(rate) if not same[g]), f"bit {b} = bit {c}"))
        effects[p] = sorted(eff, key=lambda e: -abs(e[0]))[:6]
    print("\nLargest effects on a group's local rate (points; \"bit i = bit j\": the groups where the two bits agree against those where they differ):\n")
    for p, eff in effects.items():
        print(f"- {p}: " + ", ".join(f"{n} {v:+.3f}" for v, n in eff))


if __name__ == '__main__':
    main()
