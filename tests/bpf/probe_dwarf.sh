# A function called from inside a library built without frame pointers
# (Debian's libc: qsort calls our comparator): with --unwind dwarf every call
# path is complete, through libc's frames up to _start, and names the
# program's own call sites.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/qsortcb"
for mode in fp dwarf; do
	"$ECPI" probe -q --func qsortcb_compare --unwind "$mode" --format json --report-file "$TMP/$mode.json" -- "$prog" >/dev/null 2>"$TMP/$mode.err" ||
		{ cat "$TMP/$mode.err" >&2; fail "ecpi probe --unwind $mode failed"; }
done
python3 - "$TMP/fp.json" "$TMP/dwarf.json" <<'PY' || fail "DWARF call paths are not complete"
import json, sys
fp, dw = (json.load(open(p))["functions"][0] for p in sys.argv[1:3])
assert fp["calls"] == dw["calls"] > 0, (fp["calls"], dw["calls"])
complete_fp = sum(p["calls"] for p in fp["paths"] if not p["truncated"])
complete_dw = sum(p["calls"] for p in dw["paths"] if not p["truncated"])
print(f"calls {dw['calls']}: complete paths with frame pointers {complete_fp}, with DWARF {complete_dw}", file=sys.stderr)
assert complete_dw == dw["calls"], "every DWARF path must be complete"
for p in dw["paths"]:
    names = [f["symbol"] for f in p["frames"]]
    assert names[0] == "_start", names
    for want in ("main", "qsortcb_sort"):
        assert want in names, (want, names)
    assert any(n.startswith("qsort") for n in names), names
    assert names.index("main") < names.index("qsortcb_sort"), names
PY
echo PASS
