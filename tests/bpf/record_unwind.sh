# -g unwinds user stacks by CFI in the sampler (issue 29): unwindme, built -O2
# without frame pointers, has three hot chains (a comparator called by libc's
# qsort, 60-deep recursion, a second thread); at least 95% of each chain's
# samples must come back whole, from the hot function up to the thread's root
# (_start, or libc's clone3 above the thread's start routine). With
# --call-graph fp the same check fails: frame pointers cannot walk them.
source "$TESTLIB"
require_bpf

# whole_share FOLDED: per chain, "name share samples" of the samples whose
# stack holds the chain's callers in order up to the thread's root.
whole_shares() {
	python3 - "$1" <<'PY'
import sys
ours = {"_start", "main", "unwind_sort_loop", "unwind_compare", "unwind_recurse_loop", "unwind_recurse",
        "unwind_leaf", "unwind_thread", "unwind_thread_work"}
# leaf: the program's own frames root first (libc's between them: qsort,
# __libc_start_main, ...); for the thread, start_thread and clone3 (libc,
# without symbols) are the two frames above unwind_thread.
chains = {
    "unwind_compare": ["_start", "main", "unwind_sort_loop", "unwind_compare"],
    # unwind_recurse(0) tail-calls unwind_leaf: 60 frames of unwind_recurse
    "unwind_leaf": ["_start", "main", "unwind_recurse_loop"] + ["unwind_recurse"] * 60 + ["unwind_leaf"],
    "unwind_thread_work": ["unwind_thread", "unwind_thread_work"],
}
total = {k: 0 for k in chains}; whole = {k: 0 for k in chains}
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    for leaf, want in chains.items():
        if leaf not in frames:
            continue
        total[leaf] += int(count)
        # kernel frames (a sample in a system call) sit below the user leaf
        user = frames[:len(frames) - frames[::-1].index(leaf)]
        ok = [f for f in user if f in ours] == want
        if want[0] == "_start":
            ok = ok and user[0] == "_start"
        else:
            ok = ok and len(user) == 4 and user[2] == "unwind_thread"
        whole[leaf] += int(count) if ok else 0
        break
for leaf in chains:
    print(leaf, whole[leaf] / total[leaf] if total[leaf] else 0.0, total[leaf])
PY
}

"$ECPI" record -g -o "$TMP/cfi" --format json --report-file "$TMP/cfi.json" -- "$TESTPROGS/unwindme" 6
"$ECPI" export "$TMP/cfi" --format folded -o "$TMP/cfi.folded"
whole_shares "$TMP/cfi.folded" | tee "$TMP/cfi.shares"
while read -r leaf share n; do
	[ "$n" -ge 50 ] || fail "$leaf: only $n samples"
	python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" || fail "$leaf: only $share of its stacks whole with CFI"
done <"$TMP/cfi.shares"

# The header says how many walks reached the root, and why others were cut.
"$ECPI" prof "$TMP/cfi" >"$TMP/prof.txt"
grep -E 'call stacks: [0-9.]+% reached the thread root' "$TMP/prof.txt" || fail "no call-stack line in prof's header"
"$ECPI" prof "$TMP/cfi" --format json >"$TMP/prof.json"
# A process's first samples, taken before its tables load, come as stack
# copies walked in user space with the same tables: they are whole too.
json_check "$TMP/prof.json" 'd["totals"]["cpu-clock"]["call_stacks"]["root_share"] >= 0.99'
json_check "$TMP/cfi.json" 'd["unwind_tables"]["stack_copies"] > 0'
json_check "$TMP/prof.json" 'd["totals"]["cpu-clock"]["call_stacks"]["ends"].get("frame_pointers", 0) == 0'

# Frame pointers only: the same chains are cut, and said to be unchecked.
"$ECPI" record --call-graph fp -o "$TMP/fp" -- "$TESTPROGS/unwindme" 2 2>/dev/null
"$ECPI" export "$TMP/fp" --format folded -o "$TMP/fp.folded"
whole_shares "$TMP/fp.folded" | tee "$TMP/fp.shares"
while read -r leaf share n; do
	python3 -c "import sys; sys.exit(0 if $share < 0.95 else 1)" || fail "$leaf: whole by frame pointers too ($share): the test proves nothing"
done <"$TMP/fp.shares"
"$ECPI" prof "$TMP/fp" --format json >"$TMP/fpprof.json"
json_check "$TMP/fpprof.json" 'd["totals"]["cpu-clock"]["call_stacks"]["root"] == 0'
echo PASS
