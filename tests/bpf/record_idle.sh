# Idle kept apart (issue 20): samples that find a CPU in its idle task (pid 0,
# whatever this kernel or hypervisor calls its idle function) are counted per
# CPU, left out of every share by default, named in the report's header, and
# shown as [idle cpu N] rows with --include-idle. One CPU-bound program on a
# machine of two or more CPUs leaves the others idle.
source "$TESTLIB"
require_bpf
[ "$(nproc)" -ge 2 ] || skip "needs two CPUs (one busy, one idle)"
# The kernel's own idle time over the recording decides whether idle
# samples were due: a machine kept busy by other work has none to find.
idle_ticks() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
idle_before=$(idle_ticks)
"$ECPI" record -a -F 499 --duration 2 -o "$TMP/db" 2>"$TMP/rec.txt" &
rec=$!
"$TESTPROGS/burn" 1500 >/dev/null
wait $rec || { cat "$TMP/rec.txt" >&2; fail "record -a failed"; }
idle_ms=$(( ($(idle_ticks) - idle_before) * 1000 / $(getconf CLK_TCK) ))
if ! grep "more samples found a CPU idle" "$TMP/rec.txt" >/dev/null; then
	[ "$idle_ms" -ge 500 ] || skip "the CPUs were idle for only ${idle_ms} ms during the recording (load $(cut -d' ' -f1-3 /proc/loadavg)): nothing to count"
	cat "$TMP/rec.txt" >&2
	fail "record did not count idle samples though the CPUs were idle for ${idle_ms} ms"
fi

# Default: idle counted in the header, in no row, shares over busy samples.
"$ECPI" prof "$TMP/db" >"$TMP/prof.txt" 2>/dev/null
grep -q "Idle samples, kept apart: [0-9]* samples found a CPU idle (cpu" "$TMP/prof.txt" ||
	{ cat "$TMP/prof.txt" >&2; fail "prof's header does not count idle samples per CPU"; }
grep -v "Idle samples" "$TMP/prof.txt" | grep "\[idle" >/dev/null && fail "an [idle] row without --include-idle"
"$ECPI" prof "$TMP/db" --format json >"$TMP/prof.json"
python3 - "$TMP/prof.json" <<'PY' || fail "prof's JSON does not keep idle apart"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]["cpu-clock"]
assert t["idle"] > 100, t
assert sum(t["idle_per_cpu"]) == t["idle"], t
assert not any(r["image"] == "[idle]" for r in d["rows"])
# the idle loop functions are gone from the rows (pid 0 samples never stored)
assert not any(r["procedure"] in ("pvm_safe_halt_hc", "default_idle", "acpi_safe_halt", "cpu_idle_poll") and r["percent"] > 5 for r in d["rows"]), [r for r in d["rows"][:5]]
assert sum(r["samples"]["cpu-clock"] for r in d["rows"]) == t["samples"]
PY

# --include-idle: per-CPU rows, counted in the total.
"$ECPI" prof "$TMP/db" --include-idle --format json >"$TMP/idle.json"
python3 - "$TMP/idle.json" <<'PY' || fail "prof --include-idle shows no [idle cpu N] rows"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]["cpu-clock"]
rows = [r for r in d["rows"] if r["image"] == "[idle]"]
assert rows and all(r["procedure"].startswith("[idle cpu ") for r in rows), rows
assert t["idle"] == 0
PY
idle=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["cpu-clock"]["idle"])' "$TMP/prof.json")
python3 - "$TMP/prof.json" "$TMP/idle.json" <<'PY' || fail "--include-idle does not add the idle samples to the total"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ta, tb = a["totals"]["cpu-clock"], b["totals"]["cpu-clock"]
assert tb["samples"] == ta["samples"] + ta["idle"], (ta, tb)
PY

# The other reports: kept apart with a note, shown with --include-idle.
"$ECPI" stats "$TMP/db" "$TMP/db" >/dev/null 2>"$TMP/stats.err"
grep -q "ecpi stats: note: .*cpu-clock: $idle samples found a CPU idle" "$TMP/stats.err" || { cat "$TMP/stats.err" >&2; fail "stats gave no idle note"; }
"$ECPI" export "$TMP/db" --format folded -o "$TMP/f.folded" 2>"$TMP/exp.err"
grep -q "\[idle" "$TMP/f.folded" && fail "export shows idle without --include-idle"
"$ECPI" export "$TMP/db" --format folded --include-idle -o "$TMP/g.folded" 2>/dev/null
grep -q "\[idle cpu " "$TMP/g.folded" || fail "export --include-idle shows no idle"
"$ECPI" diff "$TMP/db" "$TMP/db" --include-idle --format json >"$TMP/diff.json" 2>/dev/null
json_check "$TMP/diff.json" 'any("[idle cpu" in json.dumps(r) for r in d["rows"])'
echo PASS
