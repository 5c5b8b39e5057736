// The ClickHouse schema ecpi pushes into and reads from (docs/FLEET.md §
// "Schema"). Versioned: the `schema_version` table holds one row per
// version ever installed; readers and pushers refuse a database whose
// newest version is above kSchemaVersion, by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ecpi/fleet/clickhouse.h"
#include "ecpi/result.h"

namespace ecpi::fleet {

// 2: events.idle (issue 20: samples that found a CPU idle, kept apart).
inline constexpr std::uint32_t kSchemaVersion = 2;

struct InitOptions {
    // Empty: MergeTree tables in the URL's database (one server, or one
    // shard). Otherwise: Distributed tables over `cluster` (a remote_servers
    // entry of the server's config) whose shards hold MergeTree tables in
    // `shard_database`; rows go to a shard by cityHash64(host).
    std::string cluster;
    std::string shard_database = "ecpi";
};

// The statements init_schema() runs, in order (for docs and tests).
std::vector<std::string> schema_statements(const std::string& database, const InitOptions& options);

// Creates what is missing (idempotent) and records the version.
[[nodiscard]] Result<void> init_schema(ClickHouseClient& client, const InitOptions& options);

// The installed version; an error naming the command to run when the schema
// is missing or older than this ecpi's (`ecpi push --init` upgrades it), and
// naming the versions when it is newer than this ecpi.
[[nodiscard]] Result<std::uint32_t> check_schema(ClickHouseClient& client);
// The newest version recorded (0 when none is), older ones included; an
// error when the schema is missing or newer than this ecpi.
[[nodiscard]] Result<std::uint32_t> installed_version(ClickHouseClient& client);

}  // namespace ecpi::fleet
