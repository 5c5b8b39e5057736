#!/usr/bin/env bash
# ecpi cachesim leaves the program's stdout to the program: with a COMMAND
# the report goes to stderr (or -o FILE), so what the program writes on
# stdout is byte for byte what it writes alone, in text and JSON, for a
# program built with ecpi's flags and for an unmodified one under
# --valgrind (xz compressing to stdout: the archive must pass `xz -t`).
# A --valgrind run shows its progress on stderr when stderr is a terminal.
source "$TESTLIB"
command -v clang >/dev/null || skip "clang is not installed (make deps)"
CACHES=(--cache L1d=32k:8:64 --cache L2=256k:8:64)
FLAGS=$("$ECPI" flags memtrace) || fail "ecpi flags memtrace"
clang -O2 $FLAGS -o "$TMP/bloom" "$PROGS/bloom.c" || fail "building bloom with ecpi's flags"

# 1. A program built with ecpi's flags: its stdout alone, then under cachesim.
"$TMP/bloom" 20000 >"$TMP/alone.out" || fail "bloom alone"
[ -s "$TMP/alone.out" ] || fail "bloom printed nothing"
"$ECPI" cachesim "${CACHES[@]}" -- "$TMP/bloom" 20000 >"$TMP/text.out" 2>"$TMP/text.err" || fail "cachesim (text)"
cmp "$TMP/alone.out" "$TMP/text.out" || fail "the program's stdout differs under cachesim (text): $(head -c 300 "$TMP/text.out")"
grep -q "^L1d " "$TMP/text.err" || fail "no L1d row in the text report on stderr: $(head -c 300 "$TMP/text.err")"
"$ECPI" cachesim "${CACHES[@]}" --format json -- "$TMP/bloom" 20000 >"$TMP/json.out" 2>"$TMP/json.err" || fail "cachesim (json)"
cmp "$TMP/alone.out" "$TMP/json.out" || fail "the program's stdout differs under cachesim (json)"
json_check "$TMP/json.err" 'd["schema"] == "ecpi.cachesim" and d["levels"][0]["name"] == "L1d"'
# The program's own options stay its own, even right after a repeated
# --cache (whose values once took the "--" and left "-c" to ecpi).
"$ECPI" cachesim "${CACHES[@]}" -- "$TMP/bloom" 20000 -c -1 >"$TMP/opts.out" 2>"$TMP/opts.err" ||
	fail "the program's options after -- were taken as ecpi's: $(tail -1 "$TMP/opts.err")"
cmp "$TMP/alone.out" "$TMP/opts.out" || fail "the program's stdout differs under cachesim (with its own options)"
# -o FILE: nothing of the report on either stream.
"$ECPI" cachesim "${CACHES[@]}" -o "$TMP/report.txt" -- "$TMP/bloom" 20000 >"$TMP/o.out" 2>"$TMP/o.err" || fail "cachesim -o"
cmp "$TMP/alone.out" "$TMP/o.out" || fail "the program's stdout differs under cachesim -o"
[ ! -s "$TMP/o.err" ] || fail "cachesim -o wrote on stderr: $(head -c 300 "$TMP/o.err")"
grep -q "^L1d " "$TMP/report.txt" || fail "no L1d row in the -o report"
# A saved trace (no program) is reported on stdout.
"$ECPI" cachesim "${CACHES[@]}" --seed 3 --write-trace "$TMP/t.bin" -o /dev/null -- "$TMP/bloom" 20000 >/dev/null || fail "--write-trace"
"$ECPI" cachesim "${CACHES[@]}" --seed 3 --trace "$TMP/t.bin" >"$TMP/replay.out" || fail "--trace"
grep -q "^L1d " "$TMP/replay.out" || fail "a --trace report is not on stdout"

# 2. An unmodified program under lackey, writing binary data on stdout.
if command -v valgrind >/dev/null && command -v xz >/dev/null; then
	seq 1 5000 >"$TMP/input.txt"
	xz -c -1 "$TMP/input.txt" >"$TMP/alone.xz" || fail "xz alone"
	for fmt in text json; do
		"$ECPI" cachesim --valgrind "${CACHES[@]}" --format $fmt -- xz -c -1 "$TMP/input.txt" >"$TMP/$fmt.xz" 2>"$TMP/$fmt.xz.err" ||
			fail "cachesim --valgrind ($fmt): $(tail -3 "$TMP/$fmt.xz.err")"
		xz -t "$TMP/$fmt.xz" || fail "xz -t: the archive written under cachesim --valgrind ($fmt) is corrupt"
		cmp "$TMP/alone.xz" "$TMP/$fmt.xz" || fail "xz's stdout differs under cachesim --valgrind ($fmt)"
	done
	grep -q "^L1d " "$TMP/text.xz.err" || fail "no L1d row in the --valgrind text report on stderr"
	json_check "$TMP/json.xz.err" 'd["source"] == "lackey" and d["levels"][0]["references"] > 0'
	# Progress: on a terminal (script's pseudo-terminal) a line at most once
	# a second; none when stderr is a file (the runs above).
	if command -v script >/dev/null; then
		cp "$TMP/input.txt" "$TMP/big.txt"
		script -qec "'$ECPI' cachesim --valgrind ${CACHES[*]} -o '$TMP/big.txt.report' -- xz -c -1 '$TMP/big.txt' >/dev/null" \
			"$TMP/typescript" >/dev/null || fail "cachesim --valgrind under script"
		grep -q "M references simulated" "$TMP/typescript" || fail "no progress on a terminal: $(head -c 300 "$TMP/typescript")"
		! grep -q "references simulated" "$TMP/text.xz.err" || fail "progress written to a file"
	fi
else
	echo "note: valgrind or xz not installed; the --valgrind checks are skipped" >&2
fi
echo PASS
