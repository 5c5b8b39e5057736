# The sampler's memo of the last stack's frames (issue 29): a walk that meets
# the last whole walk's frame (same pc, sp and rbp) takes the frames above
# it from the memo, after checking each return address (and saved rbp) the
# memo's walk read against the stack as it is now. memoswap's two chains
# share memo_middle's frame (same return address, same sp) and differ above
# it: main;memo_left;memo_middle;memo_spin_left and
# main;memo_right;memo_middle;memo_spin_right, in turn many times a second.
# The memo must be used (walks joined it, frames replayed) and no stack may
# pair a leaf with the other chain's caller, which a memo trusted at its
# join point alone would do.
source "$TESTLIB"
require_bpf
command -v bpftool >/dev/null || skip "needs bpftool to read the sampler's memo counters"

"$ECPI" record -g -o "$TMP/memo" --format json --report-file "$TMP/memo.json" -- "$TESTPROGS/memoswap" 5 &
rec=$!
ECPI_TEST_PIDS+=("$rec")
# The counters live as long as the recorder: read them while it runs, until
# they pass or it ends. Not at a fixed time: the verifier alone takes 2.5-3.5
# s to load the CFI sampler here, more on a slower host, and memoswap's 5 s
# start after that.
memo_used() {
	python3 - "$1" <<'PY'
import json, sys
def number(v):
    return v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v), "little")
try:
    entries = json.load(open(sys.argv[1]))
except ValueError:
    entries = []
s = {}
for e in entries:
    k = number(e["key"])
    s[k] = s.get(k, 0) + sum(number(v["value"]) for v in e.get("values", []))
print(f"memo: {s.get(0, 0)} walks joined it, {s.get(1, 0)} frames replayed")
sys.exit(0 if s.get(0, 0) >= 50 and s.get(1, 0) >= 2 * s.get(0, 0) else 1)
PY
}
used=no
while kill -0 "$rec" 2>/dev/null; do
	if bpftool map dump name memo_stats -j >"$TMP/stats.json" 2>/dev/null && memo_used "$TMP/stats.json" >"$TMP/memo.out"; then
		used=yes
		break
	fi
	sleep 0.5
done
cat "$TMP/memo.out" 2>/dev/null
wait "$rec" || fail "ecpi record failed"
[ "$used" = yes ] || fail "the memo of the last stack's frames was not used (last read: $(cat "$TMP/memo.out" 2>/dev/null))"

"$ECPI" export "$TMP/memo" --format folded -o "$TMP/memo.folded"
python3 - "$TMP/memo.folded" <<'PY' | tee "$TMP/chains"
import sys
ours = {"main", "memo_left", "memo_right", "memo_middle", "memo_spin_left", "memo_spin_right"}
want = {"memo_spin_left": ["main", "memo_left", "memo_middle", "memo_spin_left"],
        "memo_spin_right": ["main", "memo_right", "memo_middle", "memo_spin_right"]}
total = {k: 0 for k in want}; whole = {k: 0 for k in want}; wrong = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    for leaf, chain in want.items():
        if leaf not in frames:
            continue
        total[leaf] += int(count)
        user = frames[:len(frames) - frames[::-1].index(leaf)]
        mine = [f for f in user if f in ours]
        if mine == chain and user[0] == "_start":
            whole[leaf] += int(count)
        elif any(f in mine for f in ("memo_left", "memo_right")) and mine != chain:
            wrong += int(count)
            print("wrong:", line.rstrip("\n"))
for leaf in want:
    print(leaf, whole[leaf] / total[leaf] if total[leaf] else 0.0, total[leaf])
print("wrong", wrong)
PY
grep -q "^wrong 0$" "$TMP/chains" || fail "stacks that pair a leaf with the other chain's caller: $(grep '^wrong ' "$TMP/chains")"
grep '^memo_spin' "$TMP/chains" | while read -r leaf share n; do
	[ "$n" -ge 100 ] || fail "$leaf: only $n samples"
	python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" || fail "$leaf: only $share of its stacks whole"
done
