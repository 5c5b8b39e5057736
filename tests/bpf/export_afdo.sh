# ecpi export --format afdo end to end (root): a word counter
# (testprogs/pgo/wordfreq.c) built with clang -O2 -g
# -fdebug-info-for-profiling, PIE and non-PIE, is recorded; its AutoFDO
# profile is read by llvm-profdata (count_words the hottest function, its
# inlined helpers nested, a count on its scan line), and clang
# compiles the program with it, silently, into a binary that prints the same.
# The clear errors: no line table, no samples, another build.
source "$TESTLIB"
require_bpf
CLANG=$(command -v clang || command -v clang-14 || true)
PROFDATA=$(command -v llvm-profdata || command -v llvm-profdata-14 || true)
[ -n "$CLANG" ] || skip "clang is not installed"
[ -n "$PROFDATA" ] || skip "llvm-profdata is not installed (Debian: llvm)"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../testprogs/pgo" && pwd)/wordfreq.c
rounds=60

# The line offset of a source line within count_words (clang's line - first line).
decl=$(grep -n '^__attribute__((noinline)) size_t count_words' "$src" | cut -d: -f1)
offset_of() { echo $(($(grep -n -F "$1" "$src" | head -1 | cut -d: -f1) - decl)); }
scan_offset=$(offset_of 'unsigned char c = (unsigned char)text[i];')


for pie in pie nopie; do
	flags="-fpie -pie"
	[ $pie = nopie ] && flags="-fno-pie -no-pie"
	prog="$TMP/wordfreq-$pie"
	"$CLANG" -O2 -g -fdebug-info-for-profiling $flags -o "$prog" "$src"
	"$ECPI" record -q -F 4999 -o "$TMP/$pie.db" -- "$prog" $rounds >"$TMP/$pie.out" 2>/dev/null
	"$ECPI" export "$TMP/$pie.db" --format afdo --image "$prog" -o "$TMP/$pie.afdo" 2>"$TMP/$pie.log" ||
		{ cat "$TMP/$pie.log" >&2; fail "ecpi export --format afdo failed ($pie)"; }
	"$PROFDATA" show --sample "$TMP/$pie.afdo" >"$TMP/$pie.show" 2>&1 ||
		{ cat "$TMP/$pie.show" >&2; fail "llvm-profdata cannot read the profile ($pie)"; }
	head -1 "$TMP/$pie.show" | grep -q '^Function: count_words: ' ||
		{ head -40 "$TMP/$pie.afdo" >&2; fail "count_words is not the hottest function ($pie)"; }
	"$PROFDATA" show --sample --function=count_words "$TMP/$pie.afdo" >"$TMP/$pie.cw" 2>&1
	grep -qE 'inlined callee: (add_word|is_word_char|hash_step): [0-9]+' "$TMP/$pie.cw" ||
		{ cat "$TMP/$pie.cw" >&2; fail "no inlined helper nested in count_words ($pie)"; }
	# Line counts against the counts the program knows are not checked: on a
	# loaded 2-CPU VM the words++ line came out 0.3x to 6x the words added
	# (docs/PGO.md); the scan and word lines must at least have counts.
	scan=$(sed -n "s/^ *$scan_offset\(\.[0-9]*\)\?: \([0-9]*\).*/\2/p" "$TMP/$pie.afdo" | sort -n | tail -1)
	[ -n "$scan" ] || { cat "$TMP/$pie.afdo" >&2; fail "no count on count_words' scan line ($pie)"; }
	# clang reads it without a word (a malformed profile is a warning or an error).
	"$CLANG" -O2 -g -fdebug-info-for-profiling $flags -fprofile-sample-use="$TMP/$pie.afdo" -Wall \
		-o "$prog.pgo" "$src" 2>"$TMP/$pie.clang" || { cat "$TMP/$pie.clang" >&2; fail "clang refused the profile ($pie)"; }
	[ ! -s "$TMP/$pie.clang" ] || { cat "$TMP/$pie.clang" >&2; fail "clang warned about the profile ($pie)"; }
	[ "$("$prog.pgo" 3)" = "$("$prog" 3)" ] || fail "the binary built with the profile prints something else ($pie)"
done

# Errors, one line each: an image without a line table, an image without
# samples, a file of another build than the one recorded.
"$CLANG" -O2 -o "$TMP/nolines" "$src"
"$ECPI" record -q -F 4999 -o "$TMP/nolines.db" -- "$TMP/nolines" 20 >/dev/null 2>&1
expect_exit 1 'no line table: build it with -g -fdebug-info-for-profiling' \
	"$ECPI" export "$TMP/nolines.db" --format afdo --image "$TMP/nolines" -o "$TMP/x.afdo"
expect_exit 1 'no .*samples in libnothing.so' \
	"$ECPI" export "$TMP/pie.db" --format afdo --image libnothing.so -o "$TMP/x.afdo"
"$CLANG" -O1 -g -fdebug-info-for-profiling -o "$TMP/wordfreq-pie" "$src"
expect_exit 1 'has build id .* but the profile recorded build' \
	"$ECPI" export "$TMP/pie.db" --format afdo --image "$TMP/wordfreq-pie" -o "$TMP/x.afdo"
expect_exit 2 'needs (one )?--image' "$ECPI" export "$TMP/pie.db" --format afdo -o "$TMP/x.afdo"
exit 0
