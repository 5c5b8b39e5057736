#!/usr/bin/env bash
# ecpi paths record of an `ecpi flags paths --inline` build end to end (no
# privileges; needs clang and lld): the bundled poller
# (tests/testprogs/paths/channels.c) built inline (full LTO, spans written
# straight into the ring) and out of line (stamped bursts), recorded at the
# same sampling. The inline recording must find every path the out-of-line
# one finds, with the same counts within the sampling's tolerance, lose no
# records, and say that the span fit timed its paths.
source "$TESTLIB"
command -v clang >/dev/null || skip "clang is not installed (make deps)"
command -v ld.lld >/dev/null || skip "lld is not installed (make deps): --inline links with it"
INLINE=$("$ECPI" flags paths --inline) || fail "ecpi flags paths --inline"
OUTLINE=$("$ECPI" flags paths) || fail "ecpi flags paths"
clang -O2 $INLINE -o "$TMP/channels.inline" "$PROGS/channels.c" || fail "building channels with ecpi's --inline flags"
clang -O2 $OUTLINE -o "$TMP/channels.paths" "$PROGS/channels.c" || fail "building channels with ecpi's flags"

# 300000 rounds: 1.8 M turns, about 0.1 s each way; at 1/10 the poll loop's
# rarest paths (1 turn in 6) are seen about 29000 times.
ROUNDS=300000
for build in inline paths; do
	"$ECPI" paths record -o "$TMP/$build.db" --sample 1/10 --seed 1 -- "$TMP/channels.$build" $ROUNDS >"$TMP/$build.txt" ||
		fail "paths record ($build): $(tail -3 "$TMP/$build.txt")"
	"$ECPI" paths "$TMP/$build.db" --branch --limit 0 --format json >"$TMP/$build.json" || fail "paths --branch ($build)"
done
# Both builds compute the same thing.
[ "$(head -1 "$TMP/inline.txt" | cut -d, -f1-4)" = "$(head -1 "$TMP/paths.txt" | cut -d, -f1-4)" ] ||
	fail "the builds' outputs differ: $(head -1 "$TMP/inline.txt") / $(head -1 "$TMP/paths.txt")"
json_check "$TMP/inline.json" 'd["timing"] == "span fit" and d["spans"] > 1000'
json_check "$TMP/paths.json" 'd["timing"] == "stamps" and d["spans"] == 0'
# The text report says which method timed the paths.
grep "^Time (time%, time#, 'fit') from [0-9]* spans timed at their ends" "$TMP/inline.txt" >/dev/null ||
	fail "the inline report does not say the span fit timed its paths: $(sed -n 2,6p "$TMP/inline.txt")"
! grep "spans timed at their ends" "$TMP/paths.txt" >/dev/null || fail "the out-of-line report says spans timed its paths"

# Paths are matched by procedure, how they start and end, and source lines
# (the two builds' addresses differ; full LTO may drop a line entry, so an
# inline path whose lines are a subset of the out-of-line one's matches when
# it is the only such path). An inline path's count is its stamped
# occurrences plus its occurrences in spans.
#
# Compared: the paths that hold at least 5% of the out-of-line recording's
# occurrences (the poll loop's three, 4:1:1). main's setup loop (32768
# entries, once, before the poll loop) is left out: whether the sampler's
# first random gap covers it decides its count in either build (seed 2 sees
# it in neither).
#
# Tolerances. Each path's share of the compared occurrences is fixed by the
# program (4/6, 1/6, 1/6 of the turns) in any window of consecutive block
# entries; windows lose at most a path at each edge, about 5000 spans and 150
# bursts against 175000 paths: within 0.01. A count depends besides on how
# much of the run the random gaps covered and on those edge losses (measured
# 0.2-1.9% apart over 2 seeds): within 5%. Paths found only in the inline
# recording (what a broken record stream makes: a span missing entries cuts
# paths no run takes) hold under 0.2% of its occurrences.
cat >"$TMP/compare.py" <<'PY'
import json, sys
inl, oul = (json.load(open(f)) for f in sys.argv[1:3])
def key(p): return (p["procedure"], p["start_kind"], p["end_kind"])
def lines(p): return frozenset(l["line"] for l in p["lines"])
def count(p): return p["occurrences"] + p.get("fit", {}).get("span_occurrences", 0)
problems = []
for d, name in ((inl, "inline"), (oul, "out-of-line")):
    for n in d["notes"]:
        if "dropped" in n or "lost records" in n or "not recorded" in n or "waited" in n:
            problems.append("%s recording: %s" % (name, n))
total_out = sum(count(p) for p in oul["paths"])
wanted = [p for p in oul["paths"] if count(p) >= 0.05 * total_out]
if len(wanted) < 3:
    problems.append("the out-of-line recording has %d paths over 5%%, not the poll loop's 3" % len(wanted))
matched, pairs = set(), []
for p in wanted:
    exact = [i for i, q in enumerate(inl["paths"]) if key(q) == key(p) and lines(q) == lines(p)]
    loose = [i for i, q in enumerate(inl["paths"]) if key(q) == key(p) and lines(q) <= lines(p) and i not in matched]
    found = exact or (loose if len(loose) == 1 else [])
    if not found:
        problems.append("the inline recording lacks %s %s lines %s" % (key(p), p["decisions"], sorted(lines(p))))
        continue
    matched.add(found[0])
    pairs.append((p, inl["paths"][found[0]]))
total_in_pairs, total_out_pairs = sum(count(q) for _, q in pairs), sum(count(p) for p, _ in pairs)
table = []
for p, q in pairs:
    a, b = count(q), count(p)
    share_a, share_b = a / max(1, total_in_pairs), b / max(1, total_out_pairs)
    table.append("%s lines %s: inline %d (%.4f) out-of-line %d (%.4f)" % (p["procedure"], sorted(lines(p)), a, share_a, b, share_b))
    if abs(a - b) > 0.05 * b:
        problems.append("count %d inline against %d out of line (over 5%% apart): lines %s" % (a, b, sorted(lines(p))))
    if abs(share_a - share_b) > 0.01:
        problems.append("share %.4f inline against %.4f out of line (over 0.01 apart): lines %s" % (share_a, share_b, sorted(lines(p))))
all_in = sum(count(q) for q in inl["paths"])
stray = sum(count(q) for i, q in enumerate(inl["paths"]) if i not in matched and not any(
    key(q) == key(p) and lines(q) <= lines(p) for p in oul["paths"]))
if stray > 0.002 * all_in:
    problems.append("%d of the inline recording's %d path occurrences are of paths the out-of-line one never took" % (stray, all_in))
print("; ".join(table) + "; stray %d of %d" % (stray, all_in))
for x in problems: print("FAIL: " + x)
sys.exit(1 if problems else 0)
PY
python3 "$TMP/compare.py" "$TMP/inline.json" "$TMP/paths.json" >"$TMP/compare.txt" 2>&1 || fail "$(cat "$TMP/compare.txt")"
cat "$TMP/compare.txt" >&2

# A long run: once a thread's bursts hold 2^17 block entries (about
# 1,100,000 rounds here at 1/10), they take 1 in 129 of the sampled entries
# instead of 1 in 17 (runtime/rt_spans.c): 3,000,000 rounds put about 35
# span occurrences beside each burst occurrence (16 with one share
# throughout: the check's 24 lies between), and each fitted path's
# estimated total counts both at 1 in 10.
LONG=3000000
"$ECPI" paths record -o "$TMP/long.db" --sample 1/10 --seed 2 -- "$TMP/channels.inline" $LONG >"$TMP/long.txt" ||
	fail "paths record (long): $(tail -3 "$TMP/long.txt")"
"$ECPI" paths "$TMP/long.db" --branch --limit 0 --procedure poll --format json >"$TMP/long.json" || fail "paths --branch (long)"
cat >"$TMP/long.py" <<'PY'
import json, sys
fitted = [p for p in json.load(open(sys.argv[1]))["paths"] if p.get("fit", {}).get("fitted")]
bursts = sum(p["occurrences"] for p in fitted)
spans = sum(p["fit"]["span_occurrences"] for p in fitted)
print("poll's fitted paths: %d occurrences in bursts, %d in spans (%.1f per burst occurrence)" % (bursts, spans, spans / max(1, bursts)))
ok = len(fitted) >= 3 and spans > 24 * bursts
for p in fitted:
    want = p["fit"]["mean_ns"] * (p["occurrences"] + p["fit"]["span_occurrences"]) * 10
    if abs(p["estimated_total_time_ns"] - want) > 0.01 * want:
        print("FAIL: estimated total %.0f ns, not %.0f (fitted mean x sampled occurrences x 10)" % (p["estimated_total_time_ns"], want))
        ok = False
sys.exit(0 if ok else 1)
PY
python3 "$TMP/long.py" "$TMP/long.json" >"$TMP/long_check.txt" 2>&1 || fail "$(cat "$TMP/long_check.txt")"
cat "$TMP/long_check.txt" >&2
echo PASS
