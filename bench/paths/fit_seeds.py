"""bench/paths/fit_seeds.sh's report: OUT SOURCE ROUNDS LABEL... (see there)."""
import glob
import json
import statistics
import sys

from ablation import SHARE, marked_lines, paths_of, truth


def main(out, source, rounds, labels):
    times = {}
    for line in open(f"{out}/ablation.times"):
        name, seconds = line.split()
        times.setdefault(name, []).append([seconds])
    ablated, _, _ = truth(times, rounds)
    lines = marked_lines(source)
    print("ablated: " + ", ".join(f"{k} {v:.1f} ns" for k, v in ablated.items()) +
          f"; A/B total {SHARE['A'] * ablated['A'] / (SHARE['B'] * ablated['B']):.2f}")
    for label in labels:
        fitted, first = {k: [] for k in SHARE}, []
        for f in sorted(glob.glob(f"{out}/{label}.*.json")):
            ps = paths_of(json.load(open(f)), lines)
            for k, p in ps.items():
                fitted[k].append(p["fit"]["mean_ns"] if p.get("fit", {}).get("fitted") else p["mean_ns"])
            first.append(min("AB", key=lambda k: ps[k]["rank_by_time"]))
        cells = []
        for k, xs in fitted.items():
            m = statistics.median(xs)
            near = sum(abs(x - ablated[k]) <= 0.15 * abs(ablated[k]) for x in xs)
            cells.append(f"{k} {m:.1f} ({min(xs):.1f}-{max(xs):.1f}) {100 * (m - ablated[k]) / ablated[k]:+.0f}%, "
                         f"{near} of {len(xs)} within 15%")
        print(f"{label}: " + "; ".join(cells) + f"; first by time: {''.join(first)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
