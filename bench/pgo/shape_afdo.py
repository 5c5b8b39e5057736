#!/usr/bin/env python3
"""How far AutoFDO text profiles are from an exact one in shape, whatever
their scale (bench/pgo.sh exact writes the exact one):

    shape_afdo.py EXACT.afdo PROFILE.afdo...

Each profile's top-level line counts are scaled so that they add up to the
exact profile's; then the mean |ln(ours/exact)| over the locations both
have, weighted by the exact counts. compare_afdo.py's weighted mean carries
the scale too: a daemon's epoch that saw the program run three times reads
ln 3 = 1.1 off with a perfect shape. Also printed: the scale itself (ours
over exact, in total), and the locations ours lacks (their share of the
exact total)."""
import math
import sys

from compare_afdo import parse


def top_level_counts(profile):
    counts = {}
    for name, f in profile.items():
        for loc, count in f['body'].items():
            counts[(name, loc)] = count
    return counts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    exact = top_level_counts(parse(sys.argv[1]))
    exact_total = sum(exact.values())
    for path in sys.argv[2:]:
        ours = top_level_counts(parse(path))
        ours_total = sum(ours.values())
        if not ours_total or not exact_total:
            print(f'{path}: no counts')
            continue
        scale = ours_total / exact_total
        weighted = weight = lacked = 0.0
        for loc, e in exact.items():
            o = ours.get(loc, 0)
            if e > 0 and o > 0:
                weighted += e * abs(math.log(o / scale / e))
                weight += e
            elif e > 0:
                lacked += e
        print(f'{path}: scale {scale:.2f}, shape |ln| {weighted / weight if weight else float("nan"):.3f}, '
              f'exact counts on locations ours lacks {lacked / exact_total:.1%}')


if __name__ == '__main__':
    main()
