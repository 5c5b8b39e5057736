# Call stacks through the vDSO (issue 29): timeloop polls clock_gettime,
# whose work runs in the kernel's vDSO ([vdso], no file on disk: its table
# is built from ecpi's own copy). Samples taken inside the vDSO must come
# back whole: the vDSO's function, libc's clock_gettime, time_poll, main,
# _start. timeloop is built -O2 without frame pointers, so only the vDSO's
# CFI, then libc's and timeloop's, joins them.
source "$TESTLIB"
require_bpf

"$ECPI" record -g -F 999 -o "$TMP/db" -- "$TESTPROGS/timeloop" 4
"$ECPI" export "$TMP/db" --format folded -o "$TMP/folded"
python3 - "$TMP/folded" <<'PY' | tee "$TMP/share"
import sys
total = whole = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")[1:]  # the process first
    if not any(f.startswith("__vdso_") for f in frames):
        continue
    total += int(count)
    mine = [f for f in frames if f in ("_start", "main", "time_poll") or "clock_gettime" in f]
    # root first: _start, main, time_poll, libc's clock_gettime, the vDSO's
    if frames[0] == "_start" and mine[:3] == ["_start", "main", "time_poll"] and len(mine) == 5:
        whole += int(count)
    else:
        print("cut:", stack, count, file=sys.stderr)
print(whole / total if total else 0.0, total)
PY
read -r share n <"$TMP/share"
[ "$n" -ge 50 ] || fail "only $n samples in the vDSO"
python3 -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" || fail "only $share of the vDSO's stacks reach main"
echo PASS
