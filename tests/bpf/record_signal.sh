# Call stacks through signal frames (issue 29): sigwork's SIGALRM handler
# checksums its state; the samples taken in the handler must come back whole
# through the kernel's sigreturn frame: the handler, then the interrupted
# code (sig_mix or sig_compute), then main and _start. sigwork is built -O2
# without frame pointers, so frame pointers cannot make up for a missing
# signal frame.
source "$TESTLIB"
require_bpf

"$ECPI" record -g -o "$TMP/db" -- "$TESTPROGS/sigwork" 5
"$ECPI" export "$TMP/db" --format folded -o "$TMP/folded"
python3 - "$TMP/folded" <<'PY' | tee "$TMP/share"
import sys
ours = {"_start", "main", "sig_compute", "sig_mix", "sig_on_alarm", "sig_checksum"}
total = whole = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    if "sig_checksum" not in frames:
        continue
    total += int(count)
    mine = [f for f in frames if f in ours]
    # root first: _start, main, sig_compute, [sig_mix,] sig_on_alarm, sig_checksum
    if mine[:3] == ["_start", "main", "sig_compute"] and mine[-2:] == ["sig_on_alarm", "sig_checksum"] \
            and len(mine) <= 6 and frames[0] == "_start":
        whole += int(count)
print(whole / total if total else 0.0, total)
PY
read -r share n <"$TMP/share"
[ "$n" -ge 50 ] || fail "only $n samples in the signal handler"
python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" || fail "only $share of the handler's stacks reach main through the signal frame"
echo PASS
