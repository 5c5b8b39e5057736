#!/usr/bin/env bash
# Starts (or stops) a private ClickHouse server as the calling user, on
# loopback ports, with its data, logs and configuration under one directory.
# Used by the fleet tests, the fleet benchmark and docs/FLEET.md's setup; it
# never touches the system service or /etc/clickhouse-server.
#
#   clickhouse-local.sh start DIR [HTTP_PORT]   prints the HTTP port; DIR/pid holds the server's pid
#   clickhouse-local.sh stop DIR                stops the server started in DIR (by its pid)
#   clickhouse-local.sh ports DIR               picks DIR's ports now (prints "HTTP TCP"), so a
#                                               cluster's config can name every shard before any starts
#
# Users: `ecpi` (password from DIR/ecpi.password, may write) and `reader`
# (password from DIR/reader.password, readonly=1: enough for reports).
# A `remote_servers` cluster named by ECPI_CH_CLUSTER (default ecpi_fleet)
# lists the shards in ECPI_CH_SHARDS ("127.0.0.1:9001 127.0.0.1:9002", native
# TCP ports) when set.
set -euo pipefail

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

server_binary() {
	command -v clickhouse-server 2>/dev/null || { [ -x /usr/sbin/clickhouse-server ] && echo /usr/sbin/clickhouse-server; } || true
}

write_config() {
	local dir=$1 http=$2 tcp=$3 inter=$4
	local shards=""
	if [ -n "${ECPI_CH_SHARDS:-}" ]; then
		shards="<remote_servers><${ECPI_CH_CLUSTER:-ecpi_fleet}>"
		for s in $ECPI_CH_SHARDS; do
			shards+="<shard><replica><host>${s%:*}</host><port>${s#*:}</port><user>ecpi</user><password>$(cat "$dir/ecpi.password")</password></replica></shard>"
		done
		shards+="</${ECPI_CH_CLUSTER:-ecpi_fleet}></remote_servers>"
	fi
	cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/server.err.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$http</http_port>
  <tcp_port>$tcp</tcp_port>
  <interserver_http_port>$inter</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <max_connections>256</max_connections>
  <keep_alive_timeout>3</keep_alive_timeout>
  <max_concurrent_queries>64</max_concurrent_queries>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <mlock_executable>false</mlock_executable>
  <timezone>UTC</timezone>
  $shards
</yandex>
XML
	cat >"$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles>
    <default><max_memory_usage>2000000000</max_memory_usage><max_threads>2</max_threads></default>
    <readonly><readonly>1</readonly><max_threads>2</max_threads></readonly>
  </profiles>
  <users>
    <default><password_sha256_hex>$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)</password_sha256_hex><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
    <ecpi><password_sha256_hex>$(printf %s "$(cat "$dir/ecpi.password")" | sha256sum | cut -d' ' -f1)</password_sha256_hex><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></ecpi>
    <reader><password_sha256_hex>$(printf %s "$(cat "$dir/reader.password")" | sha256sum | cut -d' ' -f1)</password_sha256_hex><networks><ip>127.0.0.1</ip></networks><profile>readonly</profile><quota>default</quota></reader>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}

start() {
	local dir=$1 http=${2:-}
	local bin
	bin=$(server_binary)
	[ -n "$bin" ] || { echo "clickhouse-local: clickhouse-server is not installed (apt-get install clickhouse-server clickhouse-client)" >&2; exit 3; }
	mkdir -p "$dir/log" "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
	dir=$(cd "$dir" && pwd)
	[ -s "$dir/ecpi.password" ] || head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/ecpi.password"
	[ -s "$dir/reader.password" ] || head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/reader.password"
	chmod 600 "$dir/ecpi.password" "$dir/reader.password"
	if [ -f "$dir/ports" ]; then
		read -r http tcp inter <"$dir/ports"
	else
		[ -n "$http" ] || http=$(free_port)
		tcp=$(free_port)
		inter=$(free_port)
		echo "$http $tcp $inter" >"$dir/ports"
	fi
	write_config "$dir" "$http" "$tcp" "$inter"
	"$bin" --config-file="$dir/config.xml" --pid-file="$dir/pid" >"$dir/log/stdout.log" 2>&1 &
	local launched=$!
	echo "$launched" >"$dir/pid"
	for _ in $(seq 1 150); do
		if curl -fsS "http://127.0.0.1:$http/ping" >/dev/null 2>&1; then
			echo "$http"
			return 0
		fi
		kill -0 "$launched" 2>/dev/null || break
		sleep 0.1
	done
	echo "clickhouse-local: the server in $dir did not answer on port $http; see $dir/log/" >&2
	tail -5 "$dir/log/server.err.log" "$dir/log/stdout.log" >&2 2>/dev/null || true
	stop "$dir"
	exit 1
}

stop() {
	local dir=$1 pid
	[ -f "$dir/pid" ] || return 0
	pid=$(cat "$dir/pid")
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$dir/pid"
}

ports() {
	local dir=$1
	mkdir -p "$dir"
	[ -f "$dir/ports" ] || echo "$(free_port) $(free_port) $(free_port)" >"$dir/ports"
	cut -d' ' -f1,2 "$dir/ports"
}

case "${1:-}" in
start) start "$2" "${3:-}" ;;
ports) ports "$2" ;;
stop) stop "$2" ;;
*) echo "usage: clickhouse-local.sh start DIR [HTTP_PORT] | stop DIR | ports DIR" >&2; exit 2 ;;
esac
