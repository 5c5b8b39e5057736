# A process whose code changes under the same pcs (issue 29): reload
# dlclose()s its first plugin (a frame pointer and a 4 KiB stack frame) and
# dlopen()s its second (neither) at the same address, so the second's hot
# pcs fall in the pc ranges of the first one's rows. The sampler keeps rows
# found by earlier samples per CPU (unwind_row_cache) under the process
# entry's generation, renewed when the recorder reloads the process's
# mappings; at least 90% of the second plugin's samples must come back whole
# and named by its own functions (a walk of them by the first plugin's rows
# reads the return address 4 KiB away, or through an rbp the second plugin
# never set, and stops short). Fails with the rows cached by pc alone.
source "$TESTLIB"
require_bpf

"$ECPI" record -g -o "$TMP/db" -- "$TESTPROGS/reload" \
	"$TESTPROGS/libreload_alpha.so" "$TESTPROGS/libreload_beta.so" 3 2>"$TMP/reload.err" ||
	{ cat "$TMP/reload.err" >&2; fail "record of reload failed"; }
cat "$TMP/reload.err"
# The premise: the second plugin sits where the first one was.
addrs=$(sed -n 's/^loaded .* at \(0x[0-9a-f]*\)$/\1/p' "$TMP/reload.err" | sort -u)
[ "$(echo "$addrs" | wc -l)" -eq 1 ] || fail "the plugins were loaded at different addresses: $addrs"

"$ECPI" export "$TMP/db" --format folded -o "$TMP/folded"
# share-of-whole-stacks PLUGIN LEAF CALLER: the share of LEAF's samples whose
# user stack is _start .. main, host_run_plugin, plugin_run, CALLER, LEAF
# with no function of the other plugin, and their count.
whole_share() {
	python3 - "$TMP/folded" "$@" <<'PY'
import sys
path, leaf, caller, other = sys.argv[1:]
want = ["_start", "main", "host_run_plugin", "plugin_run", caller, leaf]
total = whole = 0
for line in open(path):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    if leaf not in frames:
        continue
    total += int(count)
    user = frames[:frames.index(leaf) + 1]  # kernel frames (an interrupt) below it
    if frames[0] == "_start" and [f for f in user if f in want] == want and not any(f.startswith(other) for f in user):
        whole += int(count)
print(whole / total if total else 0.0, total)
PY
}
whole_share alpha_checksum alpha_rounds beta_ >"$TMP/alpha"
whole_share beta_mix beta_rounds alpha_ >"$TMP/beta"
read -r alpha_share alpha_n <"$TMP/alpha"
read -r beta_share beta_n <"$TMP/beta"
echo "first plugin: $alpha_share of $alpha_n samples whole; second: $beta_share of $beta_n"
[ "$alpha_n" -ge 100 ] || fail "only $alpha_n samples in alpha_checksum"
[ "$beta_n" -ge 100 ] || fail "only $beta_n samples in beta_mix"
python3 -c "import sys; sys.exit(0 if $alpha_share >= 0.9 and $beta_share >= 0.9 else 1)" || {
	sort -t' ' -k2 -nr "$TMP/folded" | head -8 >&2
	fail "stacks not whole: first plugin $alpha_share, second $beta_share"
}
echo PASS
