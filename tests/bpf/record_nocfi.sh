# Frame pointers where a pc has no CFI row, and CFI again above it (issue 29):
# nocfi's hot routine is hand-written assembly without an FDE that keeps a
# frame pointer; its caller is -O2 C without one, in an executable linked at
# a fixed address. At least 95% of the routine's samples must come back
# whole: the routine (by rbp), then nocfi_sum_buffer, main and _start (by
# CFI). A regression test of da1813a: the walk kept a cut lookup's row (the
# routine's gap row) with the range [0, next row), so in an image not moved
# by a load bias the caller's pc fell inside it and was walked by the gap
# row as if it were a usable one; the stacks stopped at the caller.
source "$TESTLIB"
require_bpf

"$ECPI" record -g -o "$TMP/db" -- "$TESTPROGS/nocfi" 4
"$ECPI" export "$TMP/db" --format folded -o "$TMP/folded"
python3 - "$TMP/folded" <<'PY' | tee "$TMP/share"
import sys
ours = {"_start", "main", "nocfi_sum_buffer", "nocfi_checksum"}
total = whole = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    if "nocfi_checksum" not in frames:
        continue
    total += int(count)
    user = frames[:frames.index("nocfi_checksum") + 1]  # kernel frames (an interrupt) below it
    if frames[0] == "_start" and [f for f in user if f in ours] == ["_start", "main", "nocfi_sum_buffer", "nocfi_checksum"]:
        whole += int(count)
print(whole / total if total else 0.0, total)
PY
read -r share n <"$TMP/share"
[ "$n" -ge 100 ] || fail "only $n samples in nocfi_checksum"
python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" || {
	sort -t' ' -k2 -nr "$TMP/folded" | head -5 >&2
	fail "only $share of nocfi_checksum's stacks whole"
}
# The walks through the routine's frame still end at the thread's root.
"$ECPI" prof "$TMP/db" --format json >"$TMP/prof.json"
json_check "$TMP/prof.json" 'd["totals"]["cpu-clock"]["call_stacks"]["root_share"] >= 0.95'
echo PASS
