#!/usr/bin/env python3
"""Helpers of bench/overhead.sh: record one run, and print the report.

  overhead_report.py run  --rep R --config C --throughput X --foreign F
                          [--ecpi-json FILE --db DIR] [--perf-log FILE --perf-data FILE]
      prints one JSON line describing the run (appended to runs.jsonl)
  overhead_report.py report RUNS.jsonl ALONE_CONFIG EMPTY_CONFIG
      prints the summary tables

The profile database is decoded per store/encoding.cpp (the .prof and .stk
layouts: magic, major, minor, LEB128 varints, CRC-32 trailer), only to count
the (process, image, offset) pairs and the distinct stacks that were stored.
"""
import json
import math
import os
import re
import statistics
import sys


# --------------------------------------------------------------------------
# Database decoding (read-only, trusting: these are files we just wrote).

class Reader:
    def __init__(self, data, pos):
        self.data, self.pos = data, pos

    def varint(self):
        value, shift = 0, 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self):
        n = self.varint()
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def skip_extension(self):
        n = self.varint()  # (not `self.pos += self.varint()`: pos is read first)
        self.pos += n


def decode_prof(data):
    """Returns (image, [(pid, [offsets])])."""
    if data[:4] != b"ECPP":
        raise ValueError("not a profile file")
    r = Reader(data, 6)
    path, build_id = r.string(), r.string()
    r.string()  # event
    r.varint()  # period
    r.skip_extension()
    processes = []
    for _ in range(r.varint()):
        pid = r.varint()
        offsets, offset = [], 0
        for j in range(r.varint()):
            delta = r.varint()
            r.varint()  # count
            offset = delta if j == 0 else offset + delta
            offsets.append(offset)
        processes.append((pid, offsets))
    return (path, build_id), processes


def decode_stk(data):
    """Returns the number of distinct (pid, frames) stacks stored."""
    if data[:4] != b"ECPS":
        raise ValueError("not a stack file")
    r = Reader(data, 6)
    r.string()  # event
    r.varint()  # period
    r.skip_extension()
    for _ in range(r.varint()):
        r.string()
        r.string()
    n = r.varint()
    for _ in range(n):
        r.varint()  # pid
        for _ in range(r.varint()):
            r.varint()
            r.varint()
        r.varint()  # count
    return n


def db_stats(db):
    st = {"db_bytes": 0, "prof_bytes": 0, "stk_bytes": 0, "pairs": 0, "distinct_image_offsets": 0,
          "stored_stacks": 0, "decode_error": None}
    image_offsets = set()
    try:
        for root, _, files in os.walk(db):
            for f in files:
                p = os.path.join(root, f)
                size = os.path.getsize(p)
                st["db_bytes"] += size
                if f.endswith(".prof"):
                    st["prof_bytes"] += size
                    with open(p, "rb") as fh:
                        image, processes = decode_prof(fh.read())
                    for _, offsets in processes:
                        st["pairs"] += len(offsets)
                        image_offsets.update((image, o) for o in offsets)
                elif f.endswith(".stk"):
                    st["stk_bytes"] += size
                    with open(p, "rb") as fh:
                        st["stored_stacks"] += decode_stk(fh.read())
    except (OSError, ValueError, IndexError) as e:
        st["decode_error"] = str(e)
    st["distinct_image_offsets"] = len(image_offsets)
    return st


# --------------------------------------------------------------------------

def cmd_run(argv):
    args = {}
    it = iter(argv)
    for k in it:
        args[k.lstrip("-").replace("-", "_")] = next(it)
    run = {"rep": int(args["rep"]), "config": args["config"], "throughput": float(args["throughput"]),
           "foreign_pct": float(args["foreign"]), "attempts": int(args.get("attempts", 1)),
           "disturbed": args.get("disturbed", "0") == "1",
           "workload_cpu_s": float(args.get("workload_cpu") or "nan"),
           "iterations": float(args.get("iterations") or "nan"),
           "profiler_cpu_s": float(args.get("profiler_cpu") or "0")}
    if "ecpi_json" in args:
        with open(args["ecpi_json"]) as fh:
            run["ecpi"] = json.load(fh)
        run["db"] = db_stats(args["db"])
    if "perf_log" in args:
        perf = {"samples": None, "bytes": None}
        try:
            with open(args["perf_log"]) as fh:
                text = fh.read()  # `perf report --stats`
            m = re.search(r"SAMPLE events:\s+(\d+)", text)
            if m:
                perf["samples"] = int(m.group(1))
            m = re.search(r"LOST events:\s+(\d+)", text)
            perf["lost"] = int(m.group(1)) if m else 0
            perf["bytes"] = os.path.getsize(args["perf_data"])
        except OSError:
            pass
        run["perf"] = perf
    print(json.dumps(run, sort_keys=True))


def mean_sd(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def fmt(m, sd, digits=2, unit=""):
    if m is None:
        return "n/a"
    return f"{m:.{digits}f} ± {sd:.{digits}f}{unit}"


def cmd_report(path, alone, empty):
    all_runs = [json.loads(line) for line in open(path) if line.strip()]
    runs = [r for r in all_runs if not r.get("disturbed")]
    configs = []
    for r in runs:
        if r["config"] not in configs:
            configs.append(r["config"])
    by = {(r["rep"], r["config"]): r for r in runs}
    reps = sorted({r["rep"] for r in runs})
    n = len(reps)

    def paired(cfg, fn):
        out = []
        for rep in reps:
            if (rep, cfg) in by and (rep, alone) in by and (rep, empty) in by:
                out.append(fn(by[(rep, cfg)]["throughput"], by[(rep, alone)]["throughput"],
                              by[(rep, empty)]["throughput"]))
        return out

    print(f"Throughput over {n} interleaved repetitions. loss = 1 - config/alone and excess = "
          f"loss - loss(empty) = (empty - config)/alone are computed per repetition (paired), then "
          f"mean ± sample stdev; se = stdev/sqrt(reps); med = median")
    print()
    print(f"{'config':<8} {'reps':>4} {'iter/s (mean ± sd)':>29} {'loss %':>15} {'loss med':>8} "
          f"{'excess %':>15} {'exc se':>6} {'exc med':>7} {'foreign max':>11}")
    for cfg in configs:
        t_m, t_sd = mean_sd([by[(rep, cfg)]["throughput"] for rep in reps if (rep, cfg) in by])
        if t_m is None:
            continue
        loss = paired(cfg, lambda t, a, e: 100.0 * (1 - t / a))
        excess = paired(cfg, lambda t, a, e: 100.0 * (e - t) / a)
        l_m, l_sd = mean_sd(loss)
        x_m, x_sd = mean_sd(excess)
        foreign = max(by[(rep, cfg)]["foreign_pct"] for rep in reps if (rep, cfg) in by)
        is_ref = cfg in (alone, empty)
        se = f"{x_sd / math.sqrt(len(excess)):.2f}" if len(excess) > 1 and not is_ref else "-"
        print(f"{cfg:<8} {len(loss) if cfg != alone else n:>4} {t_m:>14,.0f} ± {t_sd:>12,.0f} "
              f"{(fmt(l_m, l_sd) if cfg != alone else '-'):>15} "
              f"{(f'{statistics.median(loss):.2f}' if loss and cfg != alone else '-'):>8} "
              f"{(fmt(x_m, x_sd) if not is_ref else '-'):>15} {se:>6} "
              f"{(f'{statistics.median(excess):.2f}' if excess and not is_ref else '-'):>7} {foreign:>10.1f}%")
    print()

    ecpi_cfgs = [c for c in configs if any("ecpi" in by[(rep, c)] for rep in reps if (rep, c) in by)]
    if ecpi_cfgs:
        print("ecpi per-sample figures (mean ± sd over repetitions)")
        print()
        rows = [
            ("samples (events[0].samples)", lambda r: r["ecpi"]["events"][0]["samples"], 0),
            ("lost + spilled samples", lambda r: r["ecpi"]["events"][0].get("lost", 0)
             + r["ecpi"]["events"][0].get("spilled", 0), 0),
            ("BPF handler ns/sample", lambda r: r["ecpi"]["bpf_run_time_ns"] / r["ecpi"]["bpf_run_count"]
             if r["ecpi"].get("bpf_run_count") else None, 0),
            ("BPF handler runs", lambda r: r["ecpi"].get("bpf_run_count"), 0),
            ("loader CPU s", lambda r: r["ecpi"]["loader_cpu_seconds"], 3),
            ("loader CPU µs/sample", lambda r: 1e6 * r["ecpi"]["loader_cpu_seconds"]
             / r["ecpi"]["events"][0]["samples"], 2),
            ("wall s", lambda r: r["ecpi"]["wall_seconds"], 2),
            ("DB bytes on disk", lambda r: r["db"]["db_bytes"], 0),
            ("DB bytes/sample", lambda r: r["db"]["db_bytes"] / r["ecpi"]["events"][0]["samples"], 3),
            ("(pid,image,offset) pairs", lambda r: r["db"]["pairs"], 0),
            ("distinct (image,offset)", lambda r: r["db"]["distinct_image_offsets"], 0),
            (".prof bytes", lambda r: r["db"]["prof_bytes"], 0),
            (".prof bytes/pair", lambda r: r["db"]["prof_bytes"] / r["db"]["pairs"]
             if r["db"]["pairs"] else None, 2),
            ("DB bytes/distinct (image,offset)", lambda r: r["db"]["db_bytes"] / r["db"]["distinct_image_offsets"]
             if r["db"]["distinct_image_offsets"] else None, 2),
            ("stack_samples", lambda r: r["ecpi"].get("stack_samples"), 0),
            ("distinct_stacks_per_drain", lambda r: r["ecpi"].get("distinct_stacks_per_drain"), 0),
            ("distinct share per drain %", lambda r: 100.0 * r["ecpi"]["distinct_stacks_per_drain"]
             / r["ecpi"]["stack_samples"] if r["ecpi"].get("stack_samples") else None, 1),
            ("drains", lambda r: r["ecpi"].get("drains"), 0),
            ("stored distinct stacks (.stk)", lambda r: r["db"]["stored_stacks"] or None, 0),
            (".stk bytes", lambda r: r["db"]["stk_bytes"] or None, 0),
            (".stk bytes/stored stack", lambda r: r["db"]["stk_bytes"] / r["db"]["stored_stacks"]
             if r["db"]["stored_stacks"] else None, 1),
        ]
        print(f"{'':<34}" + "".join(f"{c:>26}" for c in ecpi_cfgs))
        for label, fn, digits in rows:
            cells = []
            for c in ecpi_cfgs:
                vals = []
                for rep in reps:
                    r = by.get((rep, c))
                    if r and "ecpi" in r:
                        try:
                            vals.append(fn(r))
                        except (KeyError, ZeroDivisionError, TypeError):
                            vals.append(None)
                m, sd = mean_sd(vals)
                cells.append(fmt(m, sd, digits))
            if all(c == "n/a" for c in cells):
                continue
            print(f"{label:<34}" + "".join(f"{c:>26}" for c in cells))
        errors = {r["db"]["decode_error"] for r in runs if "db" in r and r["db"]["decode_error"]}
        for e in sorted(errors):
            print(f"warning: database decoding failed: {e}")
        print()

    perf_cfgs = [c for c in configs if any("perf" in by[(rep, c)] for rep in reps if (rep, c) in by)]
    if perf_cfgs:
        print("perf record figures (mean ± sd over repetitions)")
        print()
        print(f"{'':<34}" + "".join(f"{c:>26}" for c in perf_cfgs))
        for label, fn, digits in [
            ("samples (perf report --stats)", lambda r: r["perf"]["samples"], 0),
            ("lost events", lambda r: r["perf"]["lost"], 0),
            ("perf.data bytes", lambda r: r["perf"]["bytes"], 0),
            ("perf.data bytes/sample", lambda r: r["perf"]["bytes"] / r["perf"]["samples"]
             if r["perf"]["samples"] else None, 1),
        ]:
            cells = []
            for c in perf_cfgs:
                vals = []
                for rep in reps:
                    r = by.get((rep, c))
                    if r and "perf" in r:
                        try:
                            vals.append(fn(r))
                        except (KeyError, ZeroDivisionError, TypeError):
                            vals.append(None)
                cells.append(fmt(*mean_sd(vals), digits))
            print(f"{label:<34}" + "".join(f"{c:>26}" for c in cells))
        print()

    retried = [r for r in all_runs if r["attempts"] > 1]
    if retried:
        print(f"{len(retried)} run(s) were redone because other processes used the CPUs during them.")
    left_out = [r for r in all_runs if r.get("disturbed")]
    if left_out:
        print(f"{len(left_out)} run(s) left out of the statistics, still disturbed after every attempt: "
              + ", ".join(f"rep {r['rep']} {r['config']}" for r in left_out))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "run":
        cmd_run(sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "report":
        cmd_report(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "dbstats":
        print(json.dumps(db_stats(sys.argv[2]), indent=2))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
