# Helpers for the fleet tests: tests/bpf/lib.sh, plus private ClickHouse
# servers (scripts/clickhouse-local.sh) that are stopped on exit, whatever
# happens. Source it after setting nothing; it sources TESTLIB itself.
source "$TESTLIB"
CLICKHOUSE_LOCAL="$(dirname "${BASH_SOURCE[0]}")/../../scripts/clickhouse-local.sh"
CH_DIRS=()

fleet_cleanup() {
	local rc=$?
	for p in "${ECPI_TEST_PIDS[@]:-}"; do  # daemons first: they talk to the servers
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
	for d in "${CH_DIRS[@]:-}"; do
		[ -n "$d" ] && bash "$CLICKHOUSE_LOCAL" stop "$d" || true
	done
	(exit "$rc")
	ecpi_cleanup
}
trap fleet_cleanup EXIT

require_clickhouse() {
	command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ] ||
		skip "clickhouse-server is not installed (scripts/install-deps.sh installs it for the tests)"
	command -v curl >/dev/null 2>&1 || skip "curl is not installed"
}

# start_clickhouse NAME: starts a server under $TMP/ch-NAME; sets CH_PORT.
start_clickhouse() {
	local dir="$TMP/ch-$1"
	mkdir -p "$dir"
	CH_DIRS+=("$dir")
	CH_PORT=$(bash "$CLICKHOUSE_LOCAL" start "$dir") || fail "ClickHouse server $1 did not start"
}

# ch_query NAME SQL: runs SQL on server NAME as its ecpi user (curl reads the password from a file).
ch_query() {
	local dir="$TMP/ch-$1" port
	read -r port _ <"$dir/ports"
	curl -fsS --max-time 20 --data-binary "$2" -H "X-ClickHouse-User: ecpi" -H "X-ClickHouse-Key: $(cat "$dir/ecpi.password")" \
		"http://127.0.0.1:$port/"
}

# prof_rows FILE: "procedure<TAB>image<TAB>build id<TAB>samples" lines of an ecpi.prof JSON, sorted.
prof_rows() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print("%s\t%s\t%s\t%d" % (r["procedure"], r["image"], r["build_id"], r["samples"]["cpu-clock"]))
PY
}

# sum_rows FILE...: the rows of several prof JSON files summed by (procedure,
# image, build id). [kernel] rows are summed into one: a pusher names kernel
# addresses when it pushes (BPF programs and modules loaded then), a later
# local report when it runs, and the two can differ for the same sample.
sum_rows() {
	python3 - "$@" <<'PY'
import json, sys, collections
total = collections.Counter()
for path in sys.argv[1:]:
    for r in json.load(open(path))["rows"]:
        procedure = "(all kernel procedures)" if r["image"] == "[kernel]" else r["procedure"]
        total[(procedure, r["image"], r["build_id"])] += r["samples"]["cpu-clock"]
for k in sorted(total):
    if total[k]:
        print("%s\t%s\t%s\t%d" % (k + (total[k],)))
PY
}
