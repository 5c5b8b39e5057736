# Register snapshots (ecpi record --registers, issue 21): by default every
# user-mode sample of a command keeps its registers, one in N with
# --registers N, none with off; nothing is lost, prof counts what was stored,
# and a bad value is a usage error. (That the snapshots hold the program's
# real registers is checked by calc_chase: a loop count measured from them.)
source "$TESTLIB"
require_bpf

# Default for a command: every user-mode sample.
"$ECPI" record -F 4999 -o "$TMP/all.db" --format json --report-file "$TMP/all.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/all.json" 'd["events"][0]["samples"] > 2000'
json_check "$TMP/all.json" 'd["events"][0]["registers_lost"] == 0'
# Kernel-mode samples keep none; a CPU-bound loop is nearly all user mode.
json_check "$TMP/all.json" '0.9 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= d["events"][0]["samples"]'
"$ECPI" prof "$TMP/all.db" --format json >"$TMP/all.prof.json"
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["registers"])' "$TMP/all.json")
json_check "$TMP/all.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"] == {"stored": '"$stored"', "every": 1, "lost": 0}'
"$ECPI" prof "$TMP/all.db" | grep -E "^    Register snapshots: $stored \(one sample in 1\), lost 0$" >/dev/null ||
	fail "prof's header does not count the register snapshots"

# With -g (the CFI walk) a sample's registers travel in its stack's ring
# record (ABI 8): as many kept, none lost, and the stack samples all there.
"$ECPI" record -g -F 4999 -o "$TMP/g.db" --format json --report-file "$TMP/g.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/g.json" 'd["events"][0]["samples"] > 2000 and d["events"][0]["registers_lost"] == 0'
json_check "$TMP/g.json" '0.9 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= d["events"][0]["samples"]'
"$ECPI" prof "$TMP/g.db" --format json >"$TMP/g.prof.json"
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["registers"])' "$TMP/g.json")
json_check "$TMP/g.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"] == {"stored": '"$stored"', "every": 1, "lost": 0}'
# --registers 4 with -g: one in four, through the same combined record.
"$ECPI" record -g -F 4999 --registers 4 -o "$TMP/g4.db" --format json --report-file "$TMP/g4.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/g4.json" '0.2 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= 0.3 * d["events"][0]["samples"]'

# One in four (per CPU).
"$ECPI" record -F 4999 --registers 4 -o "$TMP/quarter.db" --format json --report-file "$TMP/quarter.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/quarter.json" '0.2 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= 0.3 * d["events"][0]["samples"]'
"$ECPI" prof "$TMP/quarter.db" --format json >"$TMP/quarter.prof.json"
json_check "$TMP/quarter.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"]["every"] == 4'

# Each snapshot keeps the status flags it was taken with (register file 1.1,
# FORMAT.md 5a): recorded (bit 15), and EFLAGS' bits that user code always
# holds set (bit 1, reserved as 1; IF, bit 9): read from the sample's own
# registers, not left 0. Plain snapshots and -g's combined records alike.
check_flags() {
	python3 - "$1" <<'PY' || fail "$1: snapshots without their status flags"
import glob, sys
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7f) << s
        s += 7
        i += 1
        if not b[i - 1] & 0x80:
            return v, i
files = glob.glob(sys.argv[1] + "/epochs/*/registers.*.reg")
assert files, "no register file"
for f in files:
    b = open(f, "rb").read()
    assert b[:4] == b"ECPR" and b[4] == 1 and b[5] == 1, f"{f}: version {b[4]}.{b[5]}"
    n, i = varint(b, 6)
    i += n                     # event name
    _, i = varint(b, i)        # period
    _, i = varint(b, i)        # every
    length, i = varint(b, i)   # header extension
    end = i + length
    count, i = varint(b, i)
    flags = []
    while i < end and len(flags) < count:
        v, i = varint(b, i)
        flags.append(v)
    assert count > 0 and len(flags) == count, f"{f}: {len(flags)} flags of {count}"
    bad = [v for v in flags if v & 0x8202 != 0x8202]
    assert not bad, f"{f}: {len(bad)} of {count} snapshots' flags lack bits 15, 9, 1 (first {bad[0]:#x})"
PY
}
check_flags "$TMP/all.db"
check_flags "$TMP/g.db"

# Off: none kept, none reported.
"$ECPI" record -F 4999 --registers off -o "$TMP/off.db" --format json --report-file "$TMP/off.json" -- "$TESTPROGS/burn" 300 >/dev/null
json_check "$TMP/off.json" 'd["events"][0]["registers"] == 0 and d["events"][0]["samples"] > 0'
"$ECPI" prof "$TMP/off.db" --format json >"$TMP/off.prof.json"
json_check "$TMP/off.prof.json" '"register_snapshots" not in d["totals"]["cpu-clock"]'
ls "$TMP/off.db"/epochs/*/ | grep "\.reg$" >/dev/null && fail "--registers off wrote a register file"

expect_exit 2 "--registers takes N" "$ECPI" record --registers often -o "$TMP/bad.db" -- true
echo PASS
