# ecpi probe's times are net of the probe (issue 31): a uprobe+uretprobe
# pair costs from hundreds of ns to microseconds in a VM, and a probed
# call's time held all of it (a 130 ns function read 9.4-10 us, 72-75x).
# symtab_lookup takes about 100 ns a call and resolve_request, which calls
# it eight times, about 1 us; unprobed runs of the program time both with
# its own clocks (the median of three). Probing both, each one's reported
# on-CPU mean must be nearer its unprobed on-CPU time (below): the lookup's own probe cost is subtracted, and the request's too,
# with the whole probe cost of its eight probed lookups. On-CPU time, not
# wall: on a machine shared with builds, every trap is a chance for the
# scheduler to run another task, and that wait is in the wall time of the
# probed calls but not of the unprobed ones. The report says how the
# probe's cost was measured.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/symtab"
rounds=10
for i in 1 2 3; do "$prog" "$rounds" >"$TMP/base$i"; done
"$ECPI" probe -q --no-stdin --func symtab_lookup --func resolve_request --metric count,wall,cpu --format json \
	--report-file "$TMP/probe.json" -- "$prog" "$rounds" >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "ecpi probe exited $?"; }
# A lookup made inside a probed request: the request's uretprobe replaced
# its return address with the kernel's trampoline ("[uprobes]"), and the
# lookup's path names the request's real caller instead.
python3 - "$TMP/probe.json" <<'PY' || fail "a path holds the uretprobe trampoline instead of the caller's frame"
import json, sys
d = json.load(open(sys.argv[1]))
paths = [[fr["symbol"] + " " + fr.get("image", "") for fr in p["frames"]] for f in d["functions"] for p in f["paths"]]
assert not any("[uprobes]" in fr for p in paths for fr in p), paths
lookup = next(f for f in d["functions"] if f["symbol"] == "symtab_lookup")
symbols = [[fr["symbol"] for fr in p["frames"]] for p in lookup["paths"]]
assert any(s[-2:] == ["request_phase", "resolve_request"] for s in symbols), symbols
PY
python3 - "$TMP/probe.json" "$TMP"/base1 "$TMP"/base2 "$TMP"/base3 <<'PY' || fail "reported means are not the functions' own times"
import json, re, statistics, sys
d = json.load(open(sys.argv[1]))
def unprobed(name):
    runs = [float(re.search(name + r" [0-9.]+ ns/call, ([0-9.]+) ns/call on-CPU", open(f).read()).group(1))
            for f in sys.argv[2:]]
    return statistics.median(runs)
def reported(function, caller):
    f = next(f for f in d["functions"] if f["symbol"] == function)
    paths = [p for p in f["paths"] if caller in [fr["symbol"] for fr in p["frames"]]]
    assert len(paths) == 1, (function, caller, [[fr["symbol"] for fr in p["frames"]] for p in f["paths"]])
    timers = paths[0]["timers"]
    cpu = timers["cpu"]
    mean = cpu["net"]["mean_ns"] if "net" in cpu else cpu["mean_ns"]
    return mean, timers
cost = d.get("probe_cost")
print("probe cost:", cost, file=sys.stderr)
failed = []
# Net times scatter with the probes' drift from their calibration: on a
# quiet machine, in ten runs, the lookup read -0.09x to 3.1x its own time
# (as measured: 6-7x) and the request, which subtracts nine probes' cost
# (about 14 us against its own 0.6 us), -4.5x to 4.3x (as measured: about
# 19x). The check is that the subtraction takes each at least half-way from
# the time as measured to its own; times as measured fail it.
for function, caller, phase in [("symtab_lookup", "lookup_phase", "lookup"), ("resolve_request", "request_phase", "request")]:
    truth = unprobed(phase)
    mean, timers = reported(function, caller)
    print(f"{function}: unprobed {truth:.0f} ns/call, reported on-CPU {mean:.0f} ns/call ({mean / truth:.2f}x), "
          f"as measured {timers['cpu']['mean_ns']} ns; wall as measured {timers['wall']['mean_ns']} ns, "
          f"net {timers['wall'].get('net')}", file=sys.stderr)
    if not abs(mean - truth) < abs(timers["cpu"]["mean_ns"] - truth) / 2:
        failed.append(function)
assert not failed, failed
assert cost and all(cost[k]["self_wall_ns"] > 0 and cost[k]["pair_ns"] >= cost[k]["self_wall_ns"] for k in ("emulated", "stepped")), cost
PY
"$ECPI" probe -q --no-stdin --func symtab_lookup --metric count,wall --report-file "$TMP/probe.txt" -- "$prog" 1 >/dev/null 2>&1 ||
	fail "ecpi probe (text) failed"
grep -q "times are net of the probe; probe cost per call: .* ns (± .*) inside the probed call's own time" "$TMP/probe.txt" ||
	{ cat "$TMP/probe.txt" >&2; fail "the text report does not say what the probe costs"; }
