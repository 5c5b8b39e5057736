# Issue 34 defect 2: command lines of processes that exit before a drain.
# A shell runs 40 short programs, each with its own arguments; every one
# that took samples must carry its whole command line (read in BPF at exec),
# and so must the command record itself launched, with a long argument list.
source "$TESTLIB"
require_bpf
db="$TMP/db"
long_arg=$(head -c 3000 /dev/zero | tr '\0' x)
"$ECPI" record -o "$db" --report-file "$TMP/rec.txt" -- \
	sh -c "for i in \$(seq 40); do '$TESTPROGS/burn' 4 run\$i; done; '$TESTPROGS/burn' 30 last $long_arg"
"$ECPI" export "$db" --format json -o "$TMP/export.json"
python3 - "$TMP/export.json" "$TESTPROGS/burn" "$long_arg" <<'PY' || fail "command lines missing or wrong"
import json, sys
d = json.load(open(sys.argv[1]))
burn, long_arg = sys.argv[2], sys.argv[3]
procs = d["processes"]
burns = {pid: p for pid, p in procs.items() if p["comm"] == "burn"}
empty = [pid for pid, p in procs.items() if not p["cmdline"]]
print(f"{len(procs)} processes, {len(burns)} burn, {len(empty)} without a command line", file=sys.stderr)
assert not empty, f"empty cmdline: {[procs[p]['comm'] for p in empty]}"
expected = {f"{burn} 4 run{i}" for i in range(1, 41)} | {f"{burn} 30 last {long_arg}"}
got = {p["cmdline"] for p in burns.values()}
wrong = got - expected
assert not wrong, f"unexpected command lines: {[w[:80] for w in wrong]}"
assert f"{burn} 30 last {long_arg}" in got, "the long command line is missing"
assert len(burns) >= 30, f"only {len(burns)} of 41 burn processes took samples"
PY
echo PASS
