#!/usr/bin/env python3
"""Compares `ecpi calc --format json` execution counts with callgrind's exact
per-instruction counts (DCPI 6.2, Figure 8).

  compare.py rows NAME CALC_JSON REPS CG1 R1 CG2 R2 > rows.tsv
      One row per sampled instruction: workload, procedure, address, samples,
      estimated executions, true executions, confidence. The true count for
      REPS repetitions is extrapolated from two callgrind runs with R1 and R2
      repetitions (the workloads' counts are affine in the repetitions); with
      CG1 == CG2 it is CG1's count * REPS / R1 (one run per repetition).
  compare.py report ROWS.tsv...
      DCPI Figure 8's histogram (share of samples per error bucket), the
      shares within 5/10/15%, and the confidence of the bad estimates.
  compare.py procedures PREFIX...
      Issue 36's per-procedure table, for each PREFIX's .rows and .calc.json:
      samples, share within 5% and 10% of the truth, share of ranged samples
      whose range holds the truth, mean range width (max / min, geometric
      mean over ranged samples) and flow violations (blocks whose in- or
      out-flow differs from their count by more than 1e-6 of it).
  compare.py bound OUT
      For each workload of a bench/accuracy.sh output directory (epoch clock):
      the one cycles-per-sample scale, chosen in hindsight, that puts the most
      samples within 5%, and the shares it gives: what a perfect clock could
      add at most, the rest being the estimator's.
  compare.py variation OUT1 OUT2
      Two runs of bench/accuracy.sh: for each procedure with at least 1,000
      samples in both, samples x cycles per sample (epoch clock) / callgrind's
      count of its most executed instruction, in each run: the true cycles of
      one execution of its hottest code, which no estimator can know better
      than the two runs agree.
"""
import collections
import json
import math
import os
import sys


def parse_callgrind(path):
    """{object path: {runtime address: self Ir}} and {object: {fn: min address}}."""
    costs = collections.defaultdict(lambda: collections.defaultdict(int))
    fn_min = collections.defaultdict(dict)
    names = {"ob": {}, "fn": {}, "fl": {}}
    ob = fn = None
    last = [0, 0]
    skip_next = False
    positions = 2

    def name(kind, text):
        text = text.strip()
        if text.startswith("("):
            close = text.index(")")
            ident = text[1:close]
            rest = text[close + 1:].strip()
            if rest:
                names[kind][ident] = rest
            return names[kind].get(ident, rest)
        return text

    def pos(tok, i):
        if tok == "*":
            return last[i]
        if tok[0] in "+-":
            return last[i] + int(tok, 0)
        return int(tok, 0)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                toks = line.split()
                p = [pos(toks[i], i) for i in range(positions)]
                last[:] = p
                if skip_next:
                    skip_next = False
                    continue
                ir = int(toks[positions]) if len(toks) > positions else 0
                costs[ob][p[0]] += ir
                prev = fn_min[ob].get(fn)
                if prev is None or p[0] < prev:
                    fn_min[ob][fn] = p[0]
                continue
            if line.startswith("positions:"):
                positions = len(line.split()[1:])
            elif line.startswith("ob="):
                ob = name("ob", line[3:])
            elif line.startswith("fn="):
                fn = name("fn", line[3:])
            elif line.startswith(("cob=", "cfn=", "cfi=", "cfl=", "fl=", "fi=", "fe=")):
                key = line.split("=", 1)[0]
                kind = {"cob": "ob", "cfn": "fn"}.get(key, "fl")
                name(kind, line.split("=", 1)[1])
            elif line.startswith("calls="):
                skip_next = True  # the next line is the call's inclusive cost
            elif line.startswith(("jump=", "jcnd=")):
                pass
    return costs, fn_min


def same_file(a, b):
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return a == b


def rows(args):
    name, calc_json, reps, cg1, r1, cg2, r2 = args
    reps, r1, r2 = float(reps), float(r1), float(r2)
    calc = json.load(open(calc_json))
    c1, fmin1 = parse_callgrind(cg1)
    c2, _ = parse_callgrind(cg2)
    out = []
    by_image = collections.defaultdict(list)
    for p in calc["procedures"]:
        by_image[p["image"]].append(p)
    for image, procs in by_image.items():
        obs = [o for o in c1 if o and same_file(o, image)]
        if not obs:
            print(f"warning: {image} not in callgrind output", file=sys.stderr)
            continue
        ob = obs[0]
        # Load bias: runtime address - ELF address, the most common over the
        # procedures whose entry callgrind saw.
        deltas = collections.Counter()
        for p in procs:
            base = p["name"].split("(")[0]
            if base in fmin1[ob]:
                deltas[fmin1[ob][base] - int(p["start"], 16)] += 1
        if not deltas:
            print(f"warning: no common procedure names for {image}", file=sys.stderr)
            continue
        delta = deltas.most_common(1)[0][0]
        for p in procs:
            for ins in p["instructions"]:
                if ins["samples"] == 0:
                    continue
                a = int(ins["address"], 16) + delta
                n1 = c1[ob].get(a, 0)
                n2 = c2.get(ob, {}).get(a, 0)
                if cg1 == cg2:  # one run per repetition: exactly proportional
                    true = n1 * reps / r1
                else:
                    true = n1 + (n2 - n1) * (reps - r1) / (r2 - r1)
                out.append((name, p["name"], ins["address"], ins["samples"], ins["executions"], true,
                            ins["confidence"], ins.get("executions_min", ins["executions"]),
                            ins.get("executions_max", ins["executions"])))
    # A procedure with native samples of which callgrind ran no instruction
    # has no truth to compare with: glibc picks another ifunc variant under
    # valgrind's emulated CPU (__memcpy_avx512_unaligned_erms, *_evex), and
    # callgrind charges PLT stubs elsewhere. Such rows are left out and said.
    ran = collections.defaultdict(float)
    for r in out:
        ran[(r[0], r[1])] += r[5]
    left_out = collections.Counter()
    for r in out:
        if ran[(r[0], r[1])] > 0:
            print("\t".join(str(x) for x in r))
        else:
            left_out[r[1]] += r[3]
    if left_out:
        print(f"{name}: left out {sum(left_out.values())} samples of {len(left_out)} procedures callgrind never ran "
              f"(another ifunc variant, PLT stubs): " + ", ".join(f"{p} {n}" for p, n in left_out.most_common(4)),
              file=sys.stderr)


BUCKETS = [(-1e9, -0.45)] + [(lo / 100, (lo + 5) / 100) for lo in range(-45, 45, 5)] + [(0.45, 1e9)]


def bucket_label(lo, hi):
    if lo < -1:
        return "< -45%"
    if hi > 1:
        return ">= +45%"
    return f"{lo * 100:+.0f}%..{hi * 100:+.0f}%"


def report(paths):
    data = []
    for path in paths:
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if len(f) < 7:
                continue
            lo = float(f[7]) if len(f) > 8 else float(f[4])
            hi = float(f[8]) if len(f) > 8 else float(f[4])
            data.append((f[0], f[1], f[2], int(f[3]), float(f[4]), float(f[5]), f[6], lo, hi))
    if not data:
        print("no rows")
        return 1

    def summarize(rows, title):
        total = sum(r[3] for r in rows)
        hist = collections.Counter()
        within = {5: 0, 10: 0, 15: 0}
        bad_conf = collections.Counter()
        conf_all = collections.Counter()
        off3x = 0  # estimate/true outside [1/3, 3], an estimate of 0 included
        log_error = 0.0  # |ln(est / true)|, capped at ln 1000 (an estimate or a truth of 0 included)
        for _, _, _, s, est, true, conf, _, _ in rows:
            err = (est - true) / true if true > 0 else (1e9 if est > 0 else 0)
            if true > 0 and est > 0:
                log_error += s * min(abs(math.log(est / true)), math.log(1000))
            elif true > 0 or est > 0:
                log_error += s * math.log(1000)
            if true > 0 and not (1 / 3 <= est / true <= 3):
                off3x += s
            for lo, hi in BUCKETS:
                if lo <= err < hi:
                    hist[(lo, hi)] += s
            for k in within:
                if abs(err) <= k / 100:
                    within[k] += s
            conf_all[conf] += s
            if abs(err) > 0.15:
                bad_conf[conf] += s
        print(f"== {title}: {len(rows)} sampled instructions, {total} samples")
        for k in (5, 10, 15):
            print(f"   within {k:2d}%: {100 * within[k] / total:5.1f}% of samples")
        bad = sum(bad_conf.values())
        if bad:
            shares = ", ".join(f"{c} {100 * bad_conf[c] / bad:.0f}%" for c in ("low", "medium", "high"))
            print(f"   off by >15%: {100 * bad / total:.1f}% of samples, rated {shares}")
        print(f"   off by more than 3x (either way): {100 * off3x / total:.1f}% of samples")
        print(f"   mean |ln(estimate / truth)|, weighted by samples: {log_error / total:.3f}")
        shares = ", ".join(f"{c} {100 * conf_all[c] / total:.0f}%" for c in ("low", "medium", "high", "measured"))
        print(f"   confidence of all samples: {shares}")
        return hist, total

    per_workload = collections.OrderedDict()
    for r in data:
        per_workload.setdefault(r[0], []).append(r)
    for name, rs in per_workload.items():
        summarize(rs, name)
    hist, total = summarize(data, "all workloads")
    # Anchored code (counts measured by register progress) apart from the
    # rest; and whether the ranges given where the samples cannot decide
    # hold the truth.
    anchored = [r for r in data if r[6] == "measured"]
    rest = [r for r in data if r[6] != "measured"]
    if anchored:
        summarize(anchored, "anchored (measured by register progress), all workloads")
        for name in per_workload:
            a = [r for r in anchored if r[0] == name]
            if a:
                summarize(a, f"anchored, {name}")
    if rest:
        summarize(rest, "not anchored, all workloads")
    ranged = [r for r in data if r[7] != r[8]]
    if ranged:
        held = sum(r[3] for r in ranged if r[7] * 0.999 <= r[5] <= r[8] * 1.001)
        rs = sum(r[3] for r in ranged)
        print(f"== ranges: {100 * rs / total:.1f}% of samples are on ranged counts; "
              f"the range holds the truth for {100 * held / rs:.1f}% of them")
    print("\nFigure 8: samples by error of the estimated execution count (estimate/true - 1)")
    for lo, hi in BUCKETS:
        share = 100 * hist[(lo, hi)] / total
        print(f"   {bucket_label(lo, hi):>14} {share:5.1f}% {'#' * int(round(share / 2))}")
    return 0


WORKLOADS = ("loops", "branchy", "chase", "interp", "calls", "sed")


def load_rows(path):
    """(procedure, samples, estimate / true, true) for the rows with a true count."""
    out = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 7 and float(f[5]) > 0:
            out.append((f[1], int(f[3]), float(f[4]) / float(f[5]), float(f[5])))
    return out


def bound(out_dir):
    every = []
    for w in WORKLOADS:
        path = os.path.join(out_dir, f"{w}.recorded.rows")
        if not os.path.exists(path):
            continue
        rows = load_rows(path)
        total = sum(s for _, s, _, _ in rows)

        def share(k, tol):
            return sum(s for _, s, r, _ in rows if abs(r * k - 1) <= tol) / total

        # the best scale puts some row's ratio at the edge of or inside the band
        candidates = [1.0] + [e / r for _, _, r, _ in rows if r > 0 for e in (0.95, 1.0, 1.05)]
        best = max(candidates, key=lambda k: share(k, 0.05))
        print(f"{w:8} {total:7d} samples: as measured {100 * share(1, 0.05):5.1f}% within 5%; "
              f"scale x{best:.3f}: {100 * share(best, 0.05):5.1f} / {100 * share(best, 0.10):5.1f} / "
              f"{100 * share(best, 0.15):5.1f}% within 5/10/15%")
        every += [(s, r * best) for _, s, r, _ in rows]
    total = sum(s for s, _ in every)
    shares = " / ".join(f"{100 * sum(s for s, r in every if abs(r - 1) <= t) / total:.1f}" for t in (0.05, 0.10, 0.15))
    print(f"all      {total:7d} samples, each workload at its best scale: {shares}% within 5/10/15%")
    return 0


def variation(dir1, dir2):
    for w in WORKLOADS:
        runs = []
        for d in (dir1, dir2):
            rows_path = os.path.join(d, f"{w}.recorded.rows")
            calc_path = os.path.join(d, f"{w}.calc-recorded-clock.json")
            if not (os.path.exists(rows_path) and os.path.exists(calc_path)):
                break
            procs = collections.defaultdict(lambda: [0, 0.0])  # samples, largest true count
            for proc, s, _, true in load_rows(rows_path):
                procs[proc][0] += s
                procs[proc][1] = max(procs[proc][1], true)
            runs.append((json.load(open(calc_path))["period_cycles"], procs))
        if len(runs) < 2:
            continue
        (c1, p1), (c2, p2) = runs
        for proc in p1:
            if proc in p2 and min(p1[proc][0], p2[proc][0]) >= 1000:
                a = p1[proc][0] * c1 / p1[proc][1]
                b = p2[proc][0] * c2 / p2[proc][1]
                print(f"{w:8} {proc[:40]:40} {a:8.2f} {b:8.2f} cycles  {100 * (b / a - 1):+4.0f}%")
    return 0


def flow_violations(calc_json):
    """{procedure: (blocks, blocks whose in- or out-flow is not their count)}."""
    out = {}
    with open(calc_json) as f:
        doc = json.load(f)
    for p in doc["procedures"]:
        n = len(p["blocks"])
        inflow, outflow = [0.0] * n, [0.0] * n
        for e in p["edges"]:
            if isinstance(e["to"], int) and e["to"] < n:
                inflow[e["to"]] += e["executions"]
            if isinstance(e["from"], int) and e["from"] < n:
                outflow[e["from"]] += e["executions"]
        bad = 0
        for b in p["blocks"]:
            k, count = b["index"], b["executions"]
            tol = 1e-6 * max(1.0, count)
            if abs(inflow[k] - count) > tol or abs(outflow[k] - count) > tol:
                bad += 1
        out[p["name"]] = (n, bad)
    return out


def procedures(prefixes):
    print("| workload | procedure | samples | within 5% | within 10% | ranged: range holds truth | mean range width | flow violations |")
    print("|---|---|---|---|---|---|---|---|")
    for prefix in prefixes:
        name = os.path.basename(prefix)
        with open(prefix + ".rows") as f:
            rows_ = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        flows = flow_violations(prefix + ".calc.json")
        procs = sorted({r[1] for r in rows_}, key=lambda q: -sum(int(r[3]) for r in rows_ if r[1] == q))
        for proc in procs:
            sel = [r for r in rows_ if r[1] == proc]
            total = sum(int(r[3]) for r in sel)
            if total < 100:
                continue

            def share(ok):
                return 100 * sum(int(r[3]) for r in sel if ok(r)) / total

            def within(k):
                return share(lambda r: float(r[5]) > 0 and abs(float(r[4]) / float(r[5]) - 1) <= k)

            ranged = [r for r in sel if float(r[8]) > float(r[7])]
            rs = sum(int(r[3]) for r in ranged)
            held = sum(int(r[3]) for r in ranged if float(r[7]) <= float(r[5]) <= float(r[8]))
            widths = [(int(r[3]), float(r[8]) / float(r[7])) for r in ranged if float(r[7]) > 0]
            ws = sum(w for w, _ in widths)
            width = math.exp(sum(w * math.log(x) for w, x in widths) / ws) if ws else 0
            blocks, bad = flows.get(proc, (0, 0))
            held_text = f"{100 * held / rs:.1f}% of {100 * rs / total:.0f}%" if rs else "none ranged"
            print(f"| {name} | {proc[:40]} | {total:,} | {within(0.05):.1f}% | {within(0.10):.1f}% | {held_text} | "
                  f"{width:.1f}x | {bad} of {blocks} |")
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if sys.argv[1] == "rows" and len(sys.argv) == 9:
        rows(sys.argv[2:])
        return 0
    if sys.argv[1] == "report":
        return report(sys.argv[2:])
    if sys.argv[1] == "procedures":
        return procedures(sys.argv[2:])
    if sys.argv[1] == "bound" and len(sys.argv) == 3:
        return bound(sys.argv[2])
    if sys.argv[1] == "variation" and len(sys.argv) == 4:
        return variation(sys.argv[2], sys.argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
