# A real -g recording of the shares workload (60/30/10 by construction)
# through every export: pprof read back by the reference tool (go tool pprof,
# else protoc --decode), folded and speedscope parsed, the JSON schema; then
# stats and diff against a second run, and annotate with DWARF and assembly.
source "$TESTLIB"
require_bpf
SRC=$(cd "$(dirname "$TESTLIB")/../.." && pwd)
"$ECPI" record -g -o "$TMP/db" -- sh -c "\"$TESTPROGS/shares\" 2 >/dev/null" 2>/dev/null
"$ECPI" record -o "$TMP/db2" -- sh -c "\"$TESTPROGS/shares\" 1 >/dev/null" 2>/dev/null

# JSON: totals, procedures with self/total, stacks root first.
"$ECPI" export "$TMP/db" --format json -o "$TMP/export.json"
json_check "$TMP/export.json" 'd["schema"] == "ecpi.export" and d["version"] == 1'
json_check "$TMP/export.json" 'd["totals"]["cpu-clock"]["stacks"] and d["totals"]["cpu-clock"]["samples"] > 1000'
json_check "$TMP/export.json" 'd["procedures"]["cpu-clock"][0]["procedure"] == "share_sixty"'
json_check "$TMP/export.json" '50 < d["procedures"]["cpu-clock"][0]["self_percent"] < 70'
json_check "$TMP/export.json" 'sum(s["count"] for s in d["stacks"]["cpu-clock"]) == d["totals"]["cpu-clock"]["samples"]'
json_check "$TMP/export.json" 'all(d["frames"][s["frames"][-1]]["procedure"] != "" for s in d["stacks"]["cpu-clock"])'
TOTAL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["cpu-clock"]["samples"])' "$TMP/export.json")

# folded: "frame;...;frame count", root first (the process), counts add up.
"$ECPI" export "$TMP/db" --format folded -o "$TMP/out.folded"
python3 - "$TMP/out.folded" "$TOTAL" <<'PY' || fail "folded output"
import sys
total = 0; sixty = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    assert frames[0] in ("shares", "sh"), line  # the process is the root frame
    total += int(count)
    if "share_sixty" in frames: sixty += int(count)
assert total == int(sys.argv[2]), (total, sys.argv[2])
assert 0.5 < sixty / total < 0.7, sixty / total
PY

# speedscope: sampled profile, weights in ns = samples x period.
"$ECPI" export "$TMP/db" --format speedscope -o "$TMP/out.speedscope.json"
json_check "$TMP/out.speedscope.json" 'd["$schema"] == "https://www.speedscope.app/file-format-schema.json"'
json_check "$TMP/out.speedscope.json" 'd["profiles"][0]["type"] == "sampled" and d["profiles"][0]["unit"] == "nanoseconds"'
json_check "$TMP/out.speedscope.json" 'len(d["profiles"][0]["samples"]) == len(d["profiles"][0]["weights"])'
json_check "$TMP/out.speedscope.json" 'sum(d["profiles"][0]["weights"]) == d["profiles"][0]["endValue"]'
json_check "$TMP/out.speedscope.json" 'all(d["shared"]["frames"][s[0]]["name"] in ("shares", "sh") for s in d["profiles"][0]["samples"])'

# pprof, read by the reference tooling.
"$ECPI" export "$TMP/db" -o "$TMP/profile.pb.gz"
BID=$(readelf -n "$TESTPROGS/shares" | sed -n 's/.*Build ID: //p')
if command -v go >/dev/null 2>&1 && go tool pprof -h >/dev/null 2>&1; then
	HOME="$TMP" go tool pprof -symbolize=none -top "$TMP/profile.pb.gz" >"$TMP/top.txt" 2>&1 || { cat "$TMP/top.txt"; fail "go tool pprof -top"; }
	grep -q "^File: shares" "$TMP/top.txt" || { cat "$TMP/top.txt"; fail "pprof: main binary is not shares"; }
	grep -q "^Build ID: $BID" "$TMP/top.txt" || { cat "$TMP/top.txt"; fail "pprof: build id"; }
	python3 - "$TMP/top.txt" <<'PY' || { cat "$TMP/top.txt"; fail "pprof -top shares"; }
import re, sys
flat = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(\S+)", line)
    if m: flat[m.group(2)] = float(m.group(1))
assert 50 < flat["share_sixty"] < 70 and 20 < flat["share_thirty"] < 40 and 5 < flat["share_ten"] < 15, flat
PY
	HOME="$TMP" go tool pprof -symbolize=none -raw "$TMP/profile.pb.gz" >"$TMP/raw.txt" 2>&1 || fail "go tool pprof -raw"
	grep -q "shares.c:1[5-9]" "$TMP/raw.txt" || fail "pprof: no source lines of shares.c"
	grep -qE "/testprogs/shares $BID" "$TMP/raw.txt" || fail "pprof: no mapping with the build id"
	echo "pprof: decoded by go tool pprof"
elif command -v protoc >/dev/null 2>&1; then
	python3 -c 'import gzip,sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1],"rb").read()))' "$TMP/profile.pb.gz" |
		protoc --proto_path="$SRC/tests/golden" --decode=perftools.profiles.Profile "$SRC/tests/golden/profile.proto" >"$TMP/decoded.txt" ||
		fail "protoc could not decode the pprof export"
	grep -q "\"share_sixty\"" "$TMP/decoded.txt" || fail "pprof: no share_sixty"
	grep -q "\"$BID\"" "$TMP/decoded.txt" || fail "pprof: no build id"
	echo "pprof: decoded by protoc (go not installed)"
else
	skip "neither go (golang-go) nor protoc (protobuf-compiler) to decode pprof; run scripts/install-deps.sh"
fi

# stats and diff across two real runs of the same workload.
"$ECPI" stats "$TMP/db" "$TMP/db2" --format json >"$TMP/stats.json"
json_check "$TMP/stats.json" 'd["schema"] == "ecpi.stats" and len(d["sets"]) == 2'
json_check "$TMP/stats.json" '{r["procedure"] for r in d["rows"]} >= {"share_sixty", "share_thirty", "share_ten"}'
"$ECPI" diff "$TMP/db" "$TMP/db2" --format json >"$TMP/diff.json"
json_check "$TMP/diff.json" 'all(abs(r["change"]) < 10 for r in d["rows"] if r["procedure"].startswith("share_"))'
json_check "$TMP/diff.json" 'next(r for r in d["rows"] if r["procedure"] == "share_sixty")["share_a"] > 50'

# annotate: DWARF lines of shares.c and Capstone's assembly.
"$ECPI" annotate share_thirty "$TMP/db" --format json >"$TMP/annotate.json"
json_check "$TMP/annotate.json" 'd["have_code"] and d["have_lines"] and d["samples"] > 100'
json_check "$TMP/annotate.json" 'any(l["text"] and "share_thirty" in l["text"] for l in d["lines"])'
json_check "$TMP/annotate.json" 'sum(i["samples"] for b in d["blocks"] for i in b["instructions"]) == d["samples"]'
expect_exit 1 "close matches: share_thirty" "$ECPI" annotate share_thirt "$TMP/db"
echo PASS
