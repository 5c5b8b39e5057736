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
#
# The second recording drains once, at its end (--drain-interval longer than
# the run): every sample of the first plugin is named after the second
# plugin's mmap record was read. Each sample must be named with the mapping
# of its own time (a replaced mapping is kept for the samples taken before
# the replacement): at least 90% of the first plugin's samples whole and
# named by its functions. Fails when samples are named with the mappings
# as they are at the drain (then none of them is).
source "$TESTLIB"
require_bpf

# share-of-whole-stacks FOLDED LEAF CALLER OTHER: the share of LEAF's samples
# whose user stack is _start .. main, host_run_plugin, plugin_run, CALLER,
# LEAF with no function of the other plugin, and their count.
whole_share() {
	python3 - "$@" <<'PY'
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

# check_reload NAME [RECORD OPTIONS...]: records reload, checks both plugins' stacks.
check_reload() {
	local name=$1
	shift
	"$ECPI" record -g "$@" -o "$TMP/$name" -- "$TESTPROGS/reload" \
		"$TESTPROGS/libreload_alpha.so" "$TESTPROGS/libreload_beta.so" 3 2>"$TMP/$name.err" ||
		{ cat "$TMP/$name.err" >&2; fail "$name: record of reload failed"; }
	cat "$TMP/$name.err"
	# The premise: the second plugin sits where the first one was.
	local addrs
	addrs=$(sed -n 's/^loaded .* at \(0x[0-9a-f]*\)$/\1/p' "$TMP/$name.err" | sort -u)
	[ "$(echo "$addrs" | wc -l)" -eq 1 ] || fail "$name: the plugins were loaded at different addresses: $addrs"

	"$ECPI" export "$TMP/$name" --format folded -o "$TMP/$name.folded"
	local alpha_share alpha_n beta_share beta_n
	read -r alpha_share alpha_n < <(whole_share "$TMP/$name.folded" alpha_checksum alpha_rounds beta_)
	read -r beta_share beta_n < <(whole_share "$TMP/$name.folded" beta_mix beta_rounds alpha_)
	echo "$name: first plugin: $alpha_share of $alpha_n samples whole; second: $beta_share of $beta_n"
	[ "$alpha_n" -ge 100 ] || fail "$name: only $alpha_n samples in alpha_checksum"
	[ "$beta_n" -ge 100 ] || fail "$name: only $beta_n samples in beta_mix"
	python3 -c "import sys; sys.exit(0 if $alpha_share >= 0.9 and $beta_share >= 0.9 else 1)" || {
		sort -t' ' -k2 -nr "$TMP/$name.folded" | head -8 >&2
		fail "$name: stacks not whole: first plugin $alpha_share, second $beta_share"
	}
}

check_reload reload
check_reload reload-one-drain --drain-interval 60
echo PASS
