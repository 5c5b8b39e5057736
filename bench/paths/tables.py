#!/usr/bin/env python3
"""Tables for bench/paths.sh from what it leaves in one directory (OUT):

  orders.json, orders_small.json   ecpi paths --branch --format json, every path
                                   (default table; CUSTOMERS=SMALL_TABLE)
  orders.fix.times                 "default|small LOOP_SECONDS" (plain build)
  overhead.times                   "CONFIG LOOP_SECONDS"
  chain.times                      "STEPS plain|instrumented LOOP_SECONDS ITERATIONS"
  chain<STEPS>.json                the chain's paths under --sample 1/10
  ablation.times, ablation_*.json  the three-path ablation (bench/paths/ablation.py)
  sqlite_{A,A2,B}.json             SQLite's paths; sqlite_{AB,AA2,BA}.json with compare

Usage: tables.py OUT PART... (prints Markdown tables)
Environment: ORDERS_SOURCE (orders.c, to find the cold-customer lines), SMALL_TABLE.
"""
import json
import os
import statistics
import subprocess
import sys

OUT = sys.argv[1]
PARTS = sys.argv[2:]


def load(name):
    with open(os.path.join(OUT, name)) as f:
        return json.load(f)


def times(name):
    """{config: [values]} from "CONFIG VALUE..." lines, in file order."""
    out = {}
    for line in open(os.path.join(OUT, name)):
        fields = line.split()
        if len(fields) >= 2 and fields[-1]:
            out.setdefault(fields[0], []).append(fields[1:])
    return out


def median(values):
    return statistics.median(values) if values else float("nan")


def where(path, files=None):
    """file:first-last of a path's source lines (basename), or '?'."""
    lines = [(os.path.basename(l["file"]), l["line"]) for l in path["lines"]]
    if files is not None:
        lines = [l for l in lines if l[0] in files] or lines
    if not lines:
        return "?"
    f = lines[0][0]
    nums = sorted(n for g, n in lines if g == f)
    return f"{f}:{nums[0]}" + (f"-{nums[-1]}" if nums[-1] != nums[0] else "")


def ns(v):
    if v < 0:
        return "−" + ns(-v)
    if v >= 1e9:
        return f"{v / 1e9:.3f} s"
    if v >= 1e6:
        return f"{v / 1e6:.1f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} us"
    return f"{v:.1f} ns"


def path_row(i, p, files=None):
    return (f"| {i} | {p['rank_by_time']} | {p['procedure']} | {where(p, files)} | {p['occurrences']:,} | "
            f"{p['long_occurrences']:,} | {100 * p['time_share']:.1f}% | {ns(p['basetime_ns'])} | {ns(p['basetime_p10_ns'])} | "
            f"{ns(p['mean_ns'])} | {ns(p['net_variation_ns'])} | {ns(p['estimated_net_variation_ns'])} |")


PATH_HEADER = ("| rank by variation | rank by time | procedure | lines | occurrences | long | time share | basetime | p10 | mean "
               "| net variation (recorded) | net variation (estimated, whole run) |\n"
               "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")


# --- orders ---
def orders_lines():
    """Line numbers of orders.c: the cold-customer update (the `else` block)
    and the pricing block."""
    src = open(os.environ["ORDERS_SOURCE"]).read().split("\n")
    find = lambda text: next(i + 1 for i, l in enumerate(src) if text in l)
    update = set(range(find("uint64_t who ="), find("checksum ^= c->id") + 1))
    price = set(range(find("unsigned index ="), find("checksum = checksum * 31") + 1))
    return find("uint64_t who ="), update, price


def block_divides(image, block):
    """Whether the machine code from a block's start to its end (the next
    block callback, an unconditional jump or a return) divides: the
    "anybody" side divides by CUSTOMERS, a run-time value; the regulars'
    side takes the remainder by REGULARS (512) with a mask."""
    start = int(block, 16)
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
                           f"--stop-address={start + 160:#x}", image], capture_output=True, text=True).stdout
    callbacks = 0
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0].strip().endswith(":"):
            continue
        insn = fields[1].split()
        if not insn:
            continue
        if insn[0].startswith("div"):
            return True
        if insn[0] == "call" and "trace_pc_guard" in line:
            callbacks += 1
            if callbacks > 1:
                return False
        if insn[0] in ("jmp", "ret"):
            return False
    return False


def orders_paths(doc, update, price):
    """The paths through the customer update and through the pricing block."""
    in_lines = lambda p, s: any(l["line"] in s and l["file"].endswith("orders.c") for l in p["lines"])
    return ([p for p in doc["paths"] if in_lines(p, update)], [p for p in doc["paths"] if in_lines(p, price)])


def part_orders():
    small = os.environ.get("SMALL_TABLE", "2048")
    who_line, update, price = orders_lines()
    doc = load("orders.json")
    doc_small = load("orders_small.json")
    print(f"### orders: the top paths ({doc['occurrences']:,} occurrences of {doc['distinct_paths']} paths in "
          f"{doc['bursts']:,} bursts, 1 in {doc['sample_every']} block entries; recording cost "
          f"{doc['block_cost_ns']:.1f} ns per block entry subtracted)\n")
    for note in doc["notes"] + doc_small["notes"]:
        print(f"Note: {note}\n")
    print(PATH_HEADER)
    for i, p in enumerate(doc["paths"][:8], 1):
        print(path_row(i, p))
    upd, pri = orders_paths(doc, update, price)
    print(f"\nPaths through the customer update (orders.c:{min(update)}-{max(update)}; the line choosing the customer, "
          f"regulars or anybody: {who_line}), default table, then CUSTOMERS={small}:\n")
    print(PATH_HEADER.replace("| rank by variation |", "| table | rank by variation |").replace("|---:|", "|---|---:|", 1))
    for p in upd:
        print("| default " + path_row(p["rank_by_variation"], p))
    upd_small, pri_small = orders_paths(doc_small, update, price)
    for p in upd_small:
        print(f"| {small} " + path_row(p["rank_by_variation"], p))

    t = times("orders.fix.times")
    default = [float(v[0]) for v in t.get("default", [])]
    fixed = [float(v[0]) for v in t.get("small", [])]
    saved_ns = (median(default) - median(fixed)) * 1e9
    # The cold-customer path: the update path whose blocks divide (its
    # source lines are those of the regulars' path: both sides of the
    # choice begin on the same line).
    cold_paths = [p for p in upd if any(block_divides(doc["image"], b) for b in p["blocks"])]
    cold = cold_paths[0] if len(cold_paths) == 1 else None
    if cold:
        print(f"\nThe cold-customer path (the update path whose blocks divide by CUSTOMERS): {cold['signature']}, "
              f"rank **{cold['rank_by_variation']}** by net variation, **{cold['rank_by_time']}** by time.")
    else:
        print(f"\nThe cold-customer path: cannot tell it apart ({len(cold_paths)} update paths divide).")
    print(f"\n### orders: the fix (plain build, {len(default)} interleaved runs each, `loop` seconds)\n")
    print("| customers | loop, median | all runs |\n|---|---:|---|")
    print(f"| default (2,000,000: 128 MB) | {median(default):.3f} s | {', '.join(f'{v:.3f}' for v in default)} |")
    print(f"| {small} (128 KB) | {median(fixed):.3f} s | {', '.join(f'{v:.3f}' for v in fixed)} |")
    if cold:
        est = cold["estimated_net_variation_ns"]
        print(f"\nTime saved: {ns(saved_ns)}; the cold-customer path's estimated net variation: {ns(est)}; "
              f"saved / net variation = **{saved_ns / est:.2f}**.\n")
    # Where the saved time went, by the recordings: estimated total time per
    # path, default table against the small one (same instrumented binary).
    tot = lambda d: sum(p["estimated_total_time_ns"] for p in d["paths"])
    tot_of = lambda ps: sum(p["estimated_total_time_ns"] for p in ps)
    print("Recorded (instrumented build, estimated over the whole run), default table against the small one:\n")
    print("| paths | estimated total time, default | CUSTOMERS=" + small + " | difference |\n|---|---:|---:|---:|")
    for label, a, b in (("through the customer update", tot_of(upd), tot_of(upd_small)),
                        ("through the pricing block", tot_of(pri), tot_of(pri_small)),
                        ("all", tot(doc), tot(doc_small))):
        print(f"| {label} | {ns(a)} | {ns(b)} | {ns(a - b)} |")
    if pri and pri_small:
        top = lambda ps: max(ps, key=lambda p: p["occurrences"])
        a, b = top(pri), top(pri_small)
        print(f"\nThe most frequent pricing path ({where(a)}): mean {ns(a['mean_ns'])}, basetime {ns(a['basetime_ns'])} with the "
              f"default table; mean {ns(b['mean_ns'])}, basetime {ns(b['basetime_ns'])} with CUSTOMERS={small}.")
    print()


# --- overhead ---
def part_overhead():
    t = times("overhead.times")
    alone = median([float(v[0]) for v in t["alone"]])
    print("### Overhead of recording (orders, `loop` seconds, interleaved)\n")
    print("| configuration | loop, median | × alone | all runs |\n|---|---:|---:|---|")
    labels = {"alone": "plain build, alone", "instrumented": "built with `ecpi flags paths`, not recorded"}
    for config, runs in t.items():
        vals = [float(v[0]) for v in runs]
        label = labels.get(config, f"`ecpi paths record --no-save --sample {config}`")
        print(f"| {label} | {median(vals):.3f} s | {median(vals) / alone:.2f}x | {', '.join(f'{v:.3f}' for v in vals)} |")
    print()


# --- distortion ---
def part_distortion():
    t = {}
    for line in open(os.path.join(OUT, "chain.times")):
        steps, config, secs, iters = line.split()
        t.setdefault((int(steps), config), []).append(float(secs) * 1e9 / int(iters))
    print("### Distortion of a path of known cost (bench/paths/chain.c, --sample 1/10)\n")
    print("| multiplications | plain: ns per iteration (median) | per multiplication | instrumented, not recorded | "
          "recorded: occurrences | basetime | p10 | mean | basetime ÷ plain | mean ÷ plain |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    steps_all = sorted({s for s, _ in t})
    for s in steps_all:
        plain = median(t[(s, "plain")])
        instr = median(t[(s, "instrumented")])
        doc = load(f"chain{s}.json")
        p = max(doc["paths"], key=lambda p: p["occurrences"])
        print(f"| {s} | {plain:.2f} | {plain / s:.3f} | {instr:.2f} | {p['occurrences']:,} | {p['basetime_ns']:.2f} | "
              f"{p['basetime_p10_ns']:.2f} | {p['mean_ns']:.2f} | {p['basetime_ns'] / plain:.3f} | {p['mean_ns'] / plain:.3f} |")
    if len(steps_all) >= 2:
        lo, hi = steps_all[0], steps_all[-1]
        lat = (median(t[(hi, "plain")]) - median(t[(lo, "plain")])) / (hi - lo)
        print(f"\nMultiply latency from the plain build's slope ({lo} to {hi} multiplications): {lat:.3f} ns.")
        for s in steps_all:
            doc = load(f"chain{s}.json")
            p = max(doc["paths"], key=lambda p: p["occurrences"])
            print(f"- {s} multiplications: {s} × latency = {s * lat:.1f} ns; recorded basetime − that = "
                  f"{p['basetime_ns'] - s * lat:+.1f} ns, mean − that = {p['mean_ns'] - s * lat:+.1f} ns "
                  f"(block cost subtracted: {doc['block_cost_ns']:.1f} ns per entry)")
    print()


# --- sqlite ---
def overlap_var_time(doc, n=10):
    top_var = {i for i, p in enumerate(doc["paths"]) if p["rank_by_variation"] <= n}
    top_time = {i for i, p in enumerate(doc["paths"]) if p["rank_by_time"] <= n}
    return len(top_var & top_time)


def part_sqlite():
    if not os.path.exists(os.path.join(OUT, "sqlite_A.json")):
        print("### SQLite: not measured\n")
        return
    files = {"sqlite3.c", "sqlite_orders.c"}
    for name in ("A", "B"):
        doc = load(f"sqlite_{name}.json")
        cmd = " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(doc["command"]))
        var_all = sum(max(0.0, p["net_variation_ns"]) for p in doc["paths"])
        top = doc["paths"][:10]
        print(f"### SQLite, input {name} (`{cmd}`): {doc['occurrences']:,} occurrences of {doc['distinct_paths']:,} paths, "
              f"1 in {doc['sample_every']} block entries\n")
        for note in doc["notes"]:
            print(f"Note: {note}\n")
        print(PATH_HEADER)
        for i, p in enumerate(top, 1):
            print(path_row(i, p, files))
        print(f"\nTop 10 by variation: {100 * sum(p['time_share'] for p in top):.1f}% of the recorded time, "
              f"{100 * sum(p['net_variation_ns'] for p in top) / var_all:.1f}% of the net variation; "
              f"{overlap_var_time(doc)} of them are in the top 10 by time.\n")
    print("| comparison | top 10 by variation shared |\n|---|---:|")
    for name, label in (("AB", "input A against input B"), ("BA", "input B against input A"),
                        ("AA2", "input A against input A again (another seed: the sampling's own noise)")):
        c = load(f"sqlite_{name}.json")["compare"]
        print(f"| {label} | {c['overlap']} of {c['top']} |")
    print()


def part_ablation():
    import ablation
    ablation.part_ablation(OUT, load, times)


def part_reader():
    t = times("reader.times")
    plain = median([float(v[0]) for v in t.get("plain", [])])
    idle = median([float(v[0]) for v in t.get("inline_idle", [])])
    # Each round's time over the same round's plain build: the VM drifts
    # between rounds more than within one.
    def paired(key):
        pairs = zip(t.get(key, []), t.get("plain", []))
        return median([float(v[0]) / float(p[0]) for v, p in pairs])
    print("\n### Recording the inline build at 1/10 (channels)\n")
    print("| configuration | loop, median | x plain | x plain, paired per round (median) | CPU s (ecpi + program), median | waited for ring space, median |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| plain | {plain:.3f} s | 1.00x | 1.00x | | |")
    print(f"| inline, idle | {idle:.3f} s | {idle / plain:.2f}x | {paired('inline_idle'):.2f}x | | |")
    if "before_idle" in t:
        before_idle = median([float(v[0]) for v in t["before_idle"]])
        print(f"| inline with BEFORE_RUNTIME, idle | {before_idle:.3f} s | {before_idle / plain:.2f}x | {paired('before_idle'):.2f}x | | |")
    for key, what in (("inline_1/10", "inline, recorded at 1/10"),
                      ("before_1/10", "inline with BEFORE_RUNTIME, recorded at 1/10")):
        rec = t.get(key, [])
        if not rec:
            continue
        loop = median([float(v[0]) for v in rec])
        cpu = median([float(v[1]) for v in rec])
        waited = median([float(v[2]) for v in rec])
        print(f"| {what} | {loop:.3f} s | {loop / plain:.2f}x | {paired(key):.2f}x | {cpu:.2f} | {waited:.3f} s |")
    for key, what in (("touch", "records read, not decoded (null_reader touch)"),
                      ("discard", "records discarded unread (null_reader discard)")):
        if key in t:
            m = median([float(v[0]) for v in t[key]])
            print(f"| inline, recorded at 1/10, {what} | {m:.3f} s | {m / plain:.2f}x | {paired(key):.2f}x | | |")
    # This build against BEFORE_RUNTIME's directly, run against run of one
    # round (back to back, in alternating order): finer than either's ratio
    # to the plain build of the round.
    for key, what in (("idle", "idle"), ("1/10", "recorded at 1/10")):
        ratios = sorted(float(a[0]) / float(b[0]) for a, b in zip(t.get("inline_" + key, []), t.get("before_" + key, [])))
        if ratios:
            q = len(ratios) // 4
            print(f"\ninline ÷ BEFORE_RUNTIME, {what}, paired per round: median {median(ratios):.3f} "
                  f"(quartiles {ratios[q]:.3f}-{ratios[-1 - q]:.3f}, {len(ratios)} rounds)")
    print("all runs: " + "; ".join(f"{k} " + ", ".join(v[0] for v in vs) for k, vs in t.items()))


def part_breakdown():
    t = times("breakdown.times")
    rounds = {}
    for config, runs in t.items():
        for value, r in runs:
            rounds.setdefault(r, {})[config] = float(value)

    def ratios(config, over):
        return sorted(v[config] / v[over] for v in rounds.values() if config in v and over in v)

    def quartiles(values):
        q = len(values) // 4
        return f"{median(values):.3f} ({values[q]:.3f}-{values[-1 - q]:.3f})" if values else "-"
    what = {"plain": "plain build", "idle": "inline build, idle",
            "full_ecpi": "recorded at 1/10 by ecpi, the whole runtime",
            "full_discard": "... records discarded unread (null_reader discard): no reader's work",
            "nobursts_ecpi": "... no stamped bursts (ECPI_RT_BENCH_NO_BURSTS), ecpi",
            "norecords_ecpi": "... no span records in the ring (ECPI_RT_BENCH_NO_SPAN_RECORDS), ecpi",
            "neither_ecpi": "... neither (spans' clock reads and slow paths only), ecpi",
            "inline_before_ecpi": "BEFORE_RUNTIME, the whole runtime, recorded at 1/10 by ecpi"}
    print(f"\n### The recording cost at 1/10 by part (channels, {len(rounds)} rounds)\n")
    print("| configuration | loop, median | ÷ plain, paired per round: median (quartiles) | ÷ whole runtime by ecpi, paired |")
    print("|---|---:|---:|---:|")
    for config, label in what.items():
        if config in t:
            loop = median([float(v[0]) for v in t[config]])
            print(f"| {label} | {loop:.3f} s | {quartiles(ratios(config, 'plain'))} | {quartiles(ratios(config, 'full_ecpi'))} |")
    print("all runs: " + "; ".join(f"{k} " + ", ".join(v[0] for v in vs) for k, vs in t.items()))


for part in PARTS:
    globals()["part_" + part]()
