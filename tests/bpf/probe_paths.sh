# ecpi probe -- COMMAND: a bundled program calls cp_target along known call
# paths (several sites, two sites in one caller, recursion, a tail call, a
# function pointer, sleeping and spinning calls). Per-path call counts must
# be exact, and each path's innermost frame must be the return address of
# the call instruction that reached cp_target.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/callpaths"
"$ECPI" probe -q --func cp_target --format json -o "$TMP/db" --report-file "$TMP/probe.json" -- "$prog" >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "ecpi probe exited $?"; }
json_check "$TMP/probe.json" 'd["schema"] == "ecpi.probe" and d["version"] == 1 and d["final"]'
json_check "$TMP/probe.json" 'len(d["functions"]) == 1 and d["functions"][0]["calls"] == 20'
json_check "$TMP/probe.json" 'd["counters"]["ringbuf_lost"] == 0 and d["functions"][0]["unmatched"] == 0'
objdump -d --no-show-raw-insn "$prog" >"$TMP/disasm"
python3 - "$TMP/probe.json" "$prog" "$TMP/disasm" <<'PY' || fail "call paths differ from the program's"
import json, re, subprocess, sys
d = json.load(open(sys.argv[1]))
prog = sys.argv[2]
f = d["functions"][0]
assert f["symbol"] == "cp_target", f["symbol"]
# Symbol addresses and instructions of the program.
syms = {}
for line in subprocess.run(["nm", prog], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tT":
        syms[parts[2]] = int(parts[0], 16)
insns = []  # (address, text)
for line in open(sys.argv[3]):
    m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
    if m:
        insns.append((int(m.group(1), 16), m.group(2).strip()))
def insn_before(addr):
    prev = None
    for a, text in insns:
        if a == addr:
            return prev
        prev = (a, text)
    return None

got = {}
for p in f["paths"]:
    frames = p["frames"]
    assert not p["truncated"], ("truncated", p)
    names = [fr["symbol"] for fr in frames]
    i = names.index("main")
    key = tuple(names[i + 1:])
    got.setdefault(key, []).append(p)
    # The innermost frame is a return address: the instruction before it is a call.
    inner = frames[-1]
    ret = syms[inner["symbol"]] + inner["offset"]
    before = insn_before(ret)
    assert before and "call" in before[1], ("not after a call", inner, before)
    callee = "cp_tail_caller" if key == ("cp_via_tail",) else "cp_target"
    if key != ("cp_indirect",):
        assert callee in before[1], ("wrong call site", inner, before)
    else:
        assert "*" in before[1], ("not an indirect call", inner, before)
    # Every outer frame is a return address after a call too.
    for fr in frames[i:-1]:
        b = insn_before(syms[fr["symbol"]] + fr["offset"])
        assert b and "call" in b[1], ("outer frame not after a call", fr, b)

def counts(key):
    return sorted(p["calls"] for p in got.get(key, []))
expect = {
    ("cp_site_a",): [3],
    ("cp_site_b",): [1, 2],
    ("cp_recurse", "cp_recurse", "cp_recurse", "cp_recurse"): [1],
    ("cp_via_tail",): [4],
    ("cp_indirect",): [5],
    ("cp_sleeper",): [1, 1],
    ("cp_spinner",): [1, 1],
}
for key, want in expect.items():
    assert counts(key) == want, (key, counts(key), want)
assert set(got) == set(expect), set(got) ^ set(expect)
# The two sites in cp_site_b are different return addresses.
offs = {p["frames"][-1]["offset"] for p in got[("cp_site_b",)]}
assert len(offs) == 2, offs
# Timers: sleeping calls are blocked, spinning calls are on the CPU.
for p in got[("cp_sleeper",)]:
    t = p["timers"]
    assert t["wall"]["total_ns"] >= 2_000_000, t["wall"]
    assert t["blocked"]["total_ns"] >= 1_500_000 and t["cpu"]["total_ns"] < 1_000_000, t
for p in got[("cp_spinner",)]:
    t = p["timers"]
    assert t["cpu"]["total_ns"] >= 1_500_000, t["cpu"]
    # Spins 2 ms of thread CPU time by construction; waiting for a CPU on a
    # busy machine is blocked time, so only bound it by wall time.
    assert t["cpu"]["total_ns"] <= t["wall"]["total_ns"], t
    assert abs(t["cpu"]["total_ns"] + t["blocked"]["total_ns"] - t["wall"]["total_ns"]) <= 1, t
    assert t["wall"]["min_ns"] == t["wall"]["total_ns"] == t["wall"]["mean_ns"]
print("paths ok")
PY
# The saved result reads back the same (ecpi paths).
"$ECPI" paths "$TMP/db" --format json >"$TMP/paths.json"
json_check "$TMP/paths.json" 'd["functions"][0]["calls"] == 20 and len(d["functions"][0]["paths"]) == 10'
"$ECPI" paths "$TMP/db" --rank variation --format json >"$TMP/var.json"
# Only paths with two or more timed calls are ranked by variation.
json_check "$TMP/var.json" 'all(p["timers"]["wall"]["timed_calls"] >= 2 for p in d["functions"][0]["paths"])'
json_check "$TMP/var.json" 'all(p["timers"]["wall"]["net_variation_ns"] == p["timers"]["wall"]["total_ns"] - p["calls"] * p["timers"]["wall"]["min_ns"] for p in d["functions"][0]["paths"])'
v=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([p["timers"]["wall"]["net_variation_ns"] for p in d["functions"][0]["paths"]])' "$TMP/var.json")
python3 -c 'import sys; v=eval(sys.argv[1]); assert v == sorted(v, reverse=True), v' "$v" || fail "variation ranking not descending: $v"
# Count-only probes need no exit probe and print a table.
"$ECPI" probe -q --func cp_target --metric count --report-file "$TMP/count.txt" -- "$prog" >/dev/null
grep -qx "sum 23" "$TMP/out" || fail "the command's output changed under probes"
grep -q "20 calls" "$TMP/count.txt" || { cat "$TMP/count.txt" >&2; fail "count-only table"; }
grep -q "cp_recurse+0x[0-9a-f]* > cp_recurse" "$TMP/count.txt" || fail "recursion not shown as repeated frames"
echo PASS
