#!/usr/bin/env bash
# What ecpi's reader costs a recording, two ecpi builds paired (issue 31):
# channels built with `ecpi flags paths --inline` (one binary, one runtime),
# recorded at --sample 1/10 by BEFORE_ECPI and by ECPI in each round (their
# order alternated), beside the plain build and bench/paths/null_reader.c
# touch (the records read on the other CPU, not decoded). Per run: the
# program's loop time and the CPU seconds of ecpi alone (ecpi with the
# program, less the program: /usr/bin/time around each). Prints medians and
# quartiles of the ratios, paired per round. Take the exclusive quiet lock
# around it: every figure is a time.
#
#   BEFORE_ECPI=/path/to/other/ecpi bash bench/paths/reader_pair.sh
# Environment: ECPI (default build/loader/ecpi), ROUNDS (21), CHANNEL_ROUNDS (2000000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../../build/loader/ecpi}
ROUNDS=${ROUNDS:-21}
CHANNEL_ROUNDS=${CHANNEL_ROUNDS:-2000000}
[ -n "${BEFORE_ECPI:-}" ] || { echo "bench/paths/reader_pair.sh: set BEFORE_ECPI to the ecpi to compare with" >&2; exit 2; }
T=$(mktemp -d /tmp/ecpi-reader-pair.XXXXXX)
trap 'rm -rf "$T"' EXIT
source=$here/../../tests/testprogs/paths/channels.c
clang -O2 -g -o "$T/plain" "$source"
clang -O2 $("$ECPI" flags paths --inline) -o "$T/inline" "$source"
clang -O2 -o "$T/null_reader" "$here/null_reader.c"
loop_seconds() { sed -n 's/.*loop \([0-9.]*\) s.*/\1/p' | head -1; }
cpu() { awk '{print $1 + $2}' "$1"; }
# One recording: "LOOP ECPI_CPU".
record() {
	local ecpi=$1 seed=$2 loop
	loop=$(/usr/bin/time -f "%U %S" -o "$T/all" "$ecpi" paths record --no-save --sample 1/10 --seed "$seed" --limit 1 -- \
		/usr/bin/time -f "%U %S" -o "$T/program" "$T/inline" "$CHANNEL_ROUNDS" 2>/dev/null | loop_seconds)
	echo "$loop $(echo "$(cpu "$T/all") $(cpu "$T/program")" | awk '{printf "%.3f", $1 - $2}')"
}
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); channels $CHANNEL_ROUNDS rounds, $ROUNDS rounds"
: >"$T/times"
for r in $(seq "$ROUNDS"); do
	plain=$("$T/plain" "$CHANNEL_ROUNDS" | loop_seconds)
	touch=$("$T/null_reader" touch 4096 $((4096 * 9)) "$r" -- "$T/inline" "$CHANNEL_ROUNDS" | loop_seconds)
	if [ $((r % 2)) = 1 ]; then before=$(record "$BEFORE_ECPI" "$r"); after=$(record "$ECPI" "$r")
	else after=$(record "$ECPI" "$r"); before=$(record "$BEFORE_ECPI" "$r"); fi
	echo "$plain $touch $before $after" >>"$T/times"
done
echo "# done, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$T/times" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
def q(values, fmt="{:.3f}"):
    v = sorted(values)
    return f"{fmt.format(statistics.median(v))} ({fmt.format(v[len(v) // 4])}-{fmt.format(v[(3 * len(v)) // 4])})"
print("| measure (median, quartiles; paired per round) | value |\n|---|---:|")
print(f"| plain loop, s | {q([r[0] for r in rows])} |")
print(f"| null_reader touch ÷ plain | {q([r[1] / r[0] for r in rows])} |")
print(f"| BEFORE_ECPI recording ÷ plain | {q([r[2] / r[0] for r in rows])} |")
print(f"| ECPI recording ÷ plain | {q([r[4] / r[0] for r in rows])} |")
print(f"| ECPI ÷ BEFORE_ECPI, loop | {q([r[4] / r[2] for r in rows])} |")
print(f"| ecpi's CPU s, BEFORE_ECPI | {q([r[3] for r in rows])} |")
print(f"| ecpi's CPU s, ECPI | {q([r[5] for r in rows])} |")
print(f"| ECPI ÷ BEFORE_ECPI, ecpi's CPU | {q([r[5] / r[3] for r in rows if r[3] > 0])} |")
PY
