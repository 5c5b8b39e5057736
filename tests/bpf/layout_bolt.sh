# ecpi layout end to end (root): a log-record processor
# (testprogs/layout/records.c), PIE and non-PIE, is recorded; ecpi layout's
# fdata (branch records, and block counts with --format bolt-blocks) is accepted by llvm-bolt with the issue's flags, the optimized
# binary prints what the original prints, and BOLT used the profile. The
# lld order puts sampled functions only, hottest chains first, and a binary
# linked with it still works.
source "$TESTLIB"
require_bpf
command -v cc >/dev/null || skip "no C compiler"
BOLT=$(command -v llvm-bolt-16 || command -v llvm-bolt || true)
[ -n "$BOLT" ] || skip "llvm-bolt is not installed (Debian: bolt-16)"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../testprogs/layout" && pwd)

for pie in pie nopie; do
	flags=""
	[ $pie = nopie ] && flags="-fno-pie -no-pie"
	# -Wl,-q keeps the relocations BOLT needs to move functions.
	cc -O2 -g $flags -Wl,-q -o "$TMP/records-$pie" "$src/records.c"
	"$ECPI" record -q -F 4999 -o "$TMP/$pie.db" -- "$TMP/records-$pie" 6000000 >/dev/null 2>&1
	"$ECPI" layout "$TMP/$pie.db" --image "records-$pie" -o "$TMP/$pie.fdata" 2>"$TMP/$pie.log" ||
		{ cat "$TMP/$pie.log" >&2; fail "ecpi layout failed ($pie)"; }
	grep -qE '^1 count_record [0-9a-f]+ 1 count_record [0-9a-f]+ 0 [0-9]+$' "$TMP/$pie.fdata" ||
		fail "no branch record inside count_record ($pie)"
	grep -qE '^1 main [0-9a-f]+ 1 parse_record 0 0 [0-9]+$' "$TMP/$pie.fdata" || fail "no call record main -> parse_record ($pie)"
	grep -q '@plt' "$TMP/$pie.fdata" && fail "a PLT stub in the fdata ($pie)"
	"$BOLT" "$TMP/records-$pie" -o "$TMP/records-$pie.bolt" -data "$TMP/$pie.fdata" -reorder-blocks=ext-tsp \
		-reorder-functions=hfsort -split-functions -split-all-cold >"$TMP/$pie.bolt.log" 2>&1 ||
		{ cat "$TMP/$pie.bolt.log" >&2; fail "llvm-bolt refused the fdata ($pie)"; }
	grep -q "basic block reordering modified layout" "$TMP/$pie.bolt.log" ||
		{ cat "$TMP/$pie.bolt.log" >&2; fail "BOLT did not use the profile ($pie)"; }
	want=$("$TMP/records-$pie" 300000 2>/dev/null)
	got=$("$TMP/records-$pie.bolt" 300000 2>/dev/null)
	[ "$want" = "$got" ] || fail "the BOLTed binary prints '$got', the original '$want' ($pie)"
	# Block counts in BOLT's no-LBR format: accepted and used as well.
	"$ECPI" layout "$TMP/$pie.db" --image "records-$pie" --format bolt-blocks -o "$TMP/$pie.blocks" 2>/dev/null ||
		fail "ecpi layout --format bolt-blocks failed ($pie)"
	head -1 "$TMP/$pie.blocks" | grep -qE '^no_lbr [a-z-]+:$' || fail "bolt-blocks lacks the no_lbr header ($pie)"
	grep -qE '^1 count_record [0-9a-f]+ [0-9]+$' "$TMP/$pie.blocks" || fail "no block count in count_record ($pie)"
	"$BOLT" "$TMP/records-$pie" -o "$TMP/records-$pie.blocks.bolt" -data "$TMP/$pie.blocks" -reorder-blocks=ext-tsp \
		-reorder-functions=hfsort -split-functions -split-all-cold >"$TMP/$pie.blocks.log" 2>&1 ||
		{ cat "$TMP/$pie.blocks.log" >&2; fail "llvm-bolt refused the block counts ($pie)"; }
	grep -q "basic block reordering modified layout" "$TMP/$pie.blocks.log" ||
		{ cat "$TMP/$pie.blocks.log" >&2; fail "BOLT did not use the block counts ($pie)"; }
	[ "$("$TMP/records-$pie.blocks.bolt" 300000 2>/dev/null)" = "$want" ] ||
		fail "the binary BOLTed from block counts prints something else ($pie)"
	# The layout rules' counts (--counts rules; the default is flow inference): accepted too.
	"$ECPI" layout "$TMP/$pie.db" --image "records-$pie" --counts rules -o "$TMP/$pie.rules" 2>/dev/null ||
		fail "ecpi layout --counts rules failed ($pie)"
	grep -qE '^1 count_record [0-9a-f]+ 1 count_record [0-9a-f]+ 0 [0-9]+$' "$TMP/$pie.rules" ||
		fail "no branch record inside count_record with --counts rules ($pie)"
	"$BOLT" "$TMP/records-$pie" -o "$TMP/records-$pie.rules.bolt" -data "$TMP/$pie.rules" -reorder-blocks=ext-tsp \
		-reorder-functions=hfsort -split-functions -split-all-cold >"$TMP/$pie.rules.log" 2>&1 ||
		{ cat "$TMP/$pie.rules.log" >&2; fail "llvm-bolt refused the rules' fdata ($pie)"; }
done

# Orders: only sampled functions, main's chain together.
"$ECPI" layout "$TMP/pie.db" --image records-pie --format lld-order -o "$TMP/order.txt" 2>/dev/null
grep -qx count_record "$TMP/order.txt" || fail "count_record is not in the order file"
grep -q '@' "$TMP/order.txt" && fail "a PLT stub in the order file"
"$ECPI" layout "$TMP/pie.db" --image records-pie --format lld-order --order pettis-hansen >"$TMP/ph.txt" 2>/dev/null
[ "$(sort "$TMP/order.txt")" = "$(sort "$TMP/ph.txt")" ] || fail "C3 and Pettis-Hansen order different functions"
"$ECPI" layout "$TMP/pie.db" --image records-pie --format lld-call-graph >"$TMP/cg.txt" 2>/dev/null
grep -qE '^main parse_record [0-9]+$' "$TMP/cg.txt" || fail "no main -> parse_record in the call graph file"
"$ECPI" layout "$TMP/pie.db" --image records-pie --format json >"$TMP/layout.json" 2>/dev/null
json_check "$TMP/layout.json" 'd["schema"] == "ecpi.layout" and d["version"] == 1 and d["call_source"] == "call sites"'
if command -v ld.lld >/dev/null; then
	cc -O2 -ffunction-sections -fuse-ld=lld -Wl,--symbol-ordering-file="$TMP/order.txt" -o "$TMP/records-ordered" \
		"$src/records.c" 2>"$TMP/lld.log" || { cat "$TMP/lld.log" >&2; fail "lld refused the order file"; }
	[ "$("$TMP/records-ordered" 300000 2>/dev/null)" = "$want" ] || fail "the lld-ordered binary prints something else"
fi

# With -g (and frame pointers): calls come from the stacks, direct call
# sites keep their records, BOLT still accepts the file.
cc -O2 -g -fno-omit-frame-pointer -fno-pie -no-pie -Wl,-q -o "$TMP/records-fp" "$src/records.c"
"$ECPI" record -q -g -F 4999 -o "$TMP/fp.db" -- "$TMP/records-fp" 6000000 >/dev/null 2>&1
"$ECPI" layout "$TMP/fp.db" --image records-fp --format json >"$TMP/fp.json" 2>/dev/null || fail "ecpi layout (-g) failed"
json_check "$TMP/fp.json" 'd["call_source"] == "stacks" and any(c["caller"] != c["callee"] for c in d["calls"])'
"$ECPI" layout "$TMP/fp.db" --image records-fp -o "$TMP/fp.fdata" 2>/dev/null || fail "ecpi layout (-g, bolt) failed"
grep -qE '^1 main [0-9a-f]+ 1 parse_record 0 0 [0-9]+$' "$TMP/fp.fdata" || fail "no call record main -> parse_record (-g)"
"$BOLT" "$TMP/records-fp" -o "$TMP/records-fp.bolt" -data "$TMP/fp.fdata" -reorder-blocks=ext-tsp \
	-reorder-functions=hfsort -split-functions -split-all-cold >"$TMP/fp.bolt.log" 2>&1 ||
	{ cat "$TMP/fp.bolt.log" >&2; fail "llvm-bolt refused the fdata (-g)"; }

expect_exit 2 "--image" "$ECPI" layout "$TMP/pie.db"
expect_exit 2 "counts" "$ECPI" layout "$TMP/pie.db" --image records-pie --counts exact
expect_exit 1 "no .*samples in procedures of nosuchimage" "$ECPI" layout "$TMP/pie.db" --image nosuchimage
echo PASS
