#!/usr/bin/env bash
# Installs the Debian packages ecpi needs to build and test. Idempotent and
# quiet when everything is present. Needs root (or sudo) only to install.
set -euo pipefail

# What `make demo` (and any build) needs.
packages=(
	build-essential cmake pkg-config
	clang llvm                  # clang compiles the BPF programs, and programs built with `ecpi flags`
	valgrind                    # ecpi cachesim --valgrind (lackey); cachegrind is its tests' reference
	libbpf-dev bpftool          # BPF loading and skeleton generation
	libelf-dev libdw-dev        # elfutils: ELF, build ids, DWARF
	libcapstone-dev             # disassembly
	liblzma-dev                 # .gnu_debugdata (MiniDebugInfo) of stripped binaries
	libdebuginfod-dev           # debug files fetched by build id from DEBUGINFOD_URLS (docs/NAMES.md)
	libcli11-dev nlohmann-json3-dev doctest-dev
	zlib1g-dev
	libcurl4-openssl-dev        # fleet: ClickHouse over HTTP(S) (docs/FLEET.md)
)
# What only `make test` (and the benchmarks) need: `install-deps.sh --test`.
test_packages=(
	python3                     # test assertions on JSON output
	linux-perf                  # `perf record` as the benchmark's peer
	golang-go protobuf-compiler # tests: read `ecpi export --format pprof` back (go tool pprof, protoc --decode)
	chromium                    # tests: the html export in a real headless browser
	clickhouse-server clickhouse-client curl  # tests: private ClickHouse servers for the fleet tests (tests/fleet/)
	bolt-16 lld                 # tests and bench: ecpi layout's output through llvm-bolt and ld.lld
	xz-utils                    # tests: a MiniDebugInfo fixture and a forged one (tests/unit/symbols/)
	debuginfod                  # tests: a private debuginfod server on loopback (tests/unit/symbols/)
)
case "${1:-}" in
	--test) packages+=("${test_packages[@]}") ;;
	"") ;;
	*) echo "install-deps: unknown option '$1' (use --test for what the tests need too)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: need root to install ${missing[*]}: rerun as root" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
