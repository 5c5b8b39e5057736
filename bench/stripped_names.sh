#!/usr/bin/env bash
# Names for stripped code and idle from the kernel's accounting (issue 30).
#
# 1. Share of samples in rows without a function, for Debian's stripped
#    programs: `ecpi record -- gzip -6 -c FILE` and `xz -6 -c FILE` (whose
#    time is in liblzma, stripped to .dynsym). A row "without a function" is
#    one no symbol or FDE covers ("[gzip]"; "[unknown]" before issue 30); a
#    row "named from .eh_frame" has a function's extent but no name
#    ("gzip+0x4a3c0"). Also dash (a shell loop), sort (coreutils, threads) and
#    python3 (pure-Python work). Run it with two builds for before/after.
# 2. Idle per CPU: `ecpi record -a --duration D` against /proc/stat's idle +
#    iowait over the same run, per CPU, as seconds.
#
# Usage (root): bash bench/stripped_names.sh [BUILD=build] [MIB=48] [DURATION=4]
# MIB=0 measures idle only (part 2).
set -euo pipefail
BUILD=${1:-build}
MIB=${2:-48}
DURATION=${3:-4}
ECPI=$BUILD/loader/ecpi
die() { echo "bench/stripped_names.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (BPF)"
[[ -x $ECPI ]] || die "$ECPI not found: cmake --build $BUILD --target ecpi"
TMP=$(mktemp -d /tmp/ecpi-bench-names.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# ecpi: $ECPI ($(git -C "$(dirname "$ECPI")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if ((MIB > 0)); then
# Text that compresses like text (about 3:1): base64 of random bytes, with
# line structure.
head -c $((MIB * 1024 * 768)) /dev/urandom | base64 >"$TMP/input"

shares() {  # DB LABEL
	"$ECPI" prof "$1" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
label = sys.argv[1]
total = d["totals"]["cpu-clock"]["samples"]
rows = d["rows"]
nofn = sum(r["samples"]["cpu-clock"] for r in rows if r["procedure"].startswith("["))
fde = sum(r["samples"]["cpu-clock"] for r in rows if "+0x" in r["procedure"] and not r["procedure"].startswith("["))
fde_rows = sum(1 for r in rows if "+0x" in r["procedure"] and not r["procedure"].startswith("["))
top = ", ".join("%s %.1f%%" % (r["procedure"], r["percent"]) for r in rows[:3])
print("%-10s %8d %14.1f%% %18.1f%% %9d   %s" % (label, total, 100.0 * nofn / max(total, 1), 100.0 * fde / max(total, 1), fde_rows, top))
' "$2"
}

printf '%-10s %8s %15s %19s %9s   %s\n' workload samples no_function_% named_eh_frame_% fde_rows "top 3 rows"
"$ECPI" record -F 999 -o "$TMP/gzip.db" -- sh -c "gzip -6 -c '$TMP/input' >/dev/null" 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record gzip failed"; }
shares "$TMP/gzip.db" gzip
"$ECPI" record -F 999 -o "$TMP/xz.db" -- sh -c "xz -6 -T1 -c '$TMP/input' >/dev/null" 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record xz failed"; }
shares "$TMP/xz.db" xz
# dash: a shell loop's arithmetic and tests (dash is stripped to .dynsym).
"$ECPI" record -F 999 -o "$TMP/dash.db" -- dash -c 'i=0; s=0; while [ $i -lt 400000 ]; do s=$(( (s + i * 7) % 1000003 )); i=$((i + 1)); done; echo $s >/dev/null' 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record dash failed"; }
shares "$TMP/dash.db" dash
# sort: coreutils' sort of the same text, its worker threads included.
"$ECPI" record -F 999 -o "$TMP/sort.db" -- sh -c "sort -S 256M --parallel=2 '$TMP/input' >/dev/null" 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record sort failed"; }
shares "$TMP/sort.db" sort
# python3: Debian's interpreter (/usr/bin/python3: a python3 on PATH may be a
# launcher's shim) running pure-Python code (dicts, strings, ints).
cat >"$TMP/work.py" <<'PY'
import collections, re
words = collections.Counter()
with open(__import__("sys").argv[1]) as f:
    for n, line in enumerate(f):
        if n >= 60000:
            break
        for w in re.findall(r"[A-Za-z]{3,}", line):
            words[w.lower()] += 1
print(sum(len(k) * v for k, v in words.most_common(100)) % 97)
PY
"$ECPI" record -F 999 -o "$TMP/python3.db" -- /usr/bin/python3 "$TMP/work.py" "$TMP/input" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record python3 failed"; }
shares "$TMP/python3.db" python3
fi

echo
echo "# idle: ecpi record -a --duration $DURATION (load now: $(cut -d' ' -f1-3 /proc/loadavg))"
hz=$(getconf CLK_TCK)
awk '/^cpu[0-9]/ {print $1, $5 + $6}' /proc/stat >"$TMP/before"
"$ECPI" record -a --duration "$DURATION" -o "$TMP/idle.db" 2>"$TMP/err" || { cat "$TMP/err" >&2; die "record -a failed"; }
awk '/^cpu[0-9]/ {print $1, $5 + $6}' /proc/stat >"$TMP/after"
"$ECPI" prof "$TMP/idle.db" --format json 2>/dev/null >"$TMP/idle.json"
python3 - "$TMP/idle.json" "$TMP/before" "$TMP/after" "$hz" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
hz = int(sys.argv[4])
before = {l.split()[0]: int(l.split()[1]) for l in open(sys.argv[2])}
after = {l.split()[0]: int(l.split()[1]) for l in open(sys.argv[3])}
t = d["totals"]["cpu-clock"]
period = t["period"]
per_cpu = t.get("idle_per_cpu", [])
kernel = d.get("idle_ns_per_cpu")
print("%-5s %14s %16s %16s %18s" % ("cpu", "/proc/stat_s", "ecpi_idle_s", "ecpi_idle_samples", "samples_x_period_s"))
for i, cpu in enumerate(sorted(after, key=lambda c: int(c[3:]))):
    stat_s = (after[cpu] - before[cpu]) / hz
    ecpi_s = "%.2f" % (kernel[i] / 1e9) if kernel and i < len(kernel) else "-"
    n = per_cpu[i] if i < len(per_cpu) else 0
    print("%-5s %14.2f %16s %16d %18.2f" % (cpu, stat_s, ecpi_s, n, n * period / 1e9))
PY
