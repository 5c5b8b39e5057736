// The fleet schema, version 2 (docs/FLEET.md). Contracts: include/ecpi/fleet/schema.h.
#include "ecpi/fleet/schema.h"

#include <charconv>

namespace ecpi::fleet {
namespace {

struct TableDef {
    const char* name;
    const char* columns;
    const char* engine;          // for the MergeTree (local) form
    const char* sharding_key;    // for the Distributed form
};

// Samples and event totals are plain MergeTree: a row's count must never be
// collapsed with another's. Every counted row carries its batch's token, so
// a pusher can ask whether a batch is already there before (re)sending it
// (ClickHouse 18.16 deduplicates inserts only for Replicated tables). Images,
// symbols and stacks are facts, not counts: ReplacingMergeTree folds repeats.
// Every table is sharded by the pushing host, so one host's batch touches
// one shard: a shard that is down holds back only its own hosts.
constexpr TableDef kTables[] = {
    {"samples",
     "date Date, time DateTime, host String, event String, build_id String, image String, procedure String, "
     "address UInt64, samples UInt64, batch UInt64",
     "MergeTree() PARTITION BY toYYYYMM(date) ORDER BY (host, time, event, build_id, image, procedure, address)",
     "cityHash64(host)"},
    {"events",
     "date Date, time DateTime, host String, event String, period UInt64, samples UInt64, lost UInt64, batch UInt64, "
     "idle UInt64",
     "MergeTree() PARTITION BY toYYYYMM(date) ORDER BY (host, time, event)", "cityHash64(host)"},
    {"images", "build_id String, image String, host String, seen DateTime",
     "ReplacingMergeTree(seen) ORDER BY (build_id, image, host)", "cityHash64(host)"},
    {"symbols", "build_id String, image String, procedure String, start UInt64, size UInt64, host String",
     "ReplacingMergeTree() ORDER BY (build_id, image, procedure)", "cityHash64(host)"},
    {"stacks",
     "stack_id UInt64, build_ids Array(String), images Array(String), procedures Array(String), addresses Array(UInt64), "
     "host String",
     "ReplacingMergeTree() ORDER BY stack_id", "cityHash64(host)"},
    {"stack_samples",
     "date Date, time DateTime, host String, event String, stack_id UInt64, samples UInt64, batch UInt64",
     "MergeTree() PARTITION BY toYYYYMM(date) ORDER BY (host, time, event, stack_id)", "cityHash64(host)"},
    // Samples per procedure per hour, filled by a materialized view on every
    // insert into `samples` (which rows a batch check found there already are
    // never inserted again, so the rollup counts nothing twice either).
    // Reports whose time filter falls on hours read it instead of `samples`:
    // one row per (hour, host, procedure) instead of one per (push, address).
    {"procedures_hourly",
     "date Date, hour DateTime, host String, event String, build_id String, image String, procedure String, "
     "samples UInt64",
     "SummingMergeTree(samples) PARTITION BY toYYYYMM(date) ORDER BY (event, hour, host, build_id, image, procedure)",
     "cityHash64(host)"},
};

// UTC hours whatever the server's time zone (toStartOfHour would use it).
constexpr const char* kRollupSelect =
    "SELECT date, toDateTime(intDiv(toUInt32(time), 3600) * 3600) AS hour, host, event, build_id, image, procedure, "
    "sum(samples) AS samples FROM {db}.samples GROUP BY date, hour, host, event, build_id, image, procedure";

}  // namespace

std::vector<std::string> schema_statements(const std::string& database, const InitOptions& options) {
    const std::string db = sql_identifier(database);
    std::vector<std::string> out;
    out.push_back("CREATE DATABASE IF NOT EXISTS " + db);
    for (const auto& t : kTables) {
        std::string engine = options.cluster.empty()
                                 ? std::string(t.engine)
                                 : "Distributed(" + sql_identifier(options.cluster) + ", " +
                                       sql_identifier(options.shard_database) + ", " + t.name + ", " + t.sharding_key + ")";
        out.push_back("CREATE TABLE IF NOT EXISTS " + db + "." + t.name + " (" + t.columns + ") ENGINE = " + engine);
    }
    if (options.cluster.empty()) {  // shards fill their own rollups; a Distributed front only reads them
        std::string select = kRollupSelect;
        select.replace(select.find("{db}"), 4, db);
        out.push_back("CREATE MATERIALIZED VIEW IF NOT EXISTS " + db + ".procedures_hourly_mv TO " + db +
                      ".procedures_hourly AS " + select);
    }
    out.push_back("CREATE TABLE IF NOT EXISTS " + db +
                  ".schema_version (version UInt32, installed DateTime, layout String) ENGINE = TinyLog");
    return out;
}

namespace {

// Version 1's events table lacks `idle` (CREATE TABLE IF NOT EXISTS keeps
// an old table as it was): added at the end, where version 2 writes it.
Result<void> upgrade_schema(ClickHouseClient& client, const std::string& database) {
    ECPI_ASSIGN_OR_RETURN(auto rows, client.select("SELECT count() FROM system.columns WHERE database = " +
                                                   sql_string(database) + " AND table = 'events' AND name = 'idle'"));
    if (!rows.empty() && !rows.front().empty() && rows.front().front() != "0") return ok();
    auto r = client.execute("ALTER TABLE " + sql_identifier(database) + ".events ADD COLUMN idle UInt64 DEFAULT 0");
    if (!r.ok()) return r.error().with_context("upgrading the ecpi schema to version 2 (events.idle)");
    return ok();
}

}  // namespace

Result<void> init_schema(ClickHouseClient& client, const InitOptions& options) {
    if (!options.cluster.empty() && (!is_plain_identifier(options.cluster) || !is_plain_identifier(options.shard_database)))
        return Error("cluster and shard database names must be letters, digits and _");
    const std::string& database = client.url().database;
    for (const auto& statement : schema_statements(database, options)) {
        auto r = client.execute(statement);
        if (!r.ok()) return r.error().with_context("creating the ecpi schema");
    }
    ECPI_RETURN_IF_ERROR(upgrade_schema(client, database));
    ECPI_ASSIGN_OR_RETURN(std::uint32_t installed, installed_version(client));
    if (installed < kSchemaVersion) {
        std::string layout = options.cluster.empty() ? "local" : "distributed:" + options.cluster + ":" + options.shard_database;
        auto r = client.execute("INSERT INTO " + sql_identifier(database) + ".schema_version VALUES (" +
                                std::to_string(kSchemaVersion) + ", now(), " + sql_string(layout) + ")");
        if (!r.ok()) return r.error().with_context("recording the schema version");
    }
    return ok();
}

Result<std::uint32_t> check_schema(ClickHouseClient& client) {
    ECPI_ASSIGN_OR_RETURN(std::uint32_t version, installed_version(client));
    if (version < kSchemaVersion)
        return Error(client.url().display() + " holds ecpi schema version " + std::to_string(version) +
                     ", older than this ecpi's (" + std::to_string(kSchemaVersion) + "): upgrade it with `ecpi push --init --to " +
                     client.url().display() + "`");
    return version;
}

Result<std::uint32_t> installed_version(ClickHouseClient& client) {
    const std::string& database = client.url().database;
    auto exists = client.select("SELECT count() FROM system.tables WHERE database = " + sql_string(database) +
                                " AND name = 'schema_version'");
    if (!exists.ok()) return exists.error();
    if (exists->empty() || exists->front().empty() || exists->front().front() == "0")
        return Error(client.url().display() + " has no ecpi schema: create it with `ecpi push --init --to " +
                     client.url().display() + "`");
    ECPI_ASSIGN_OR_RETURN(auto rows, client.select("SELECT max(version) FROM " + sql_identifier(database) + ".schema_version"));
    std::uint32_t version = 0;
    if (!rows.empty() && !rows.front().empty()) {
        const std::string& text = rows.front().front();
        std::from_chars(text.data(), text.data() + text.size(), version);
    }
    if (version > kSchemaVersion)
        return Error(client.url().display() + " holds ecpi schema version " + std::to_string(version) +
                     ", newer than this ecpi supports (" + std::to_string(kSchemaVersion) + "); upgrade ecpi");
    return version;
}

}  // namespace ecpi::fleet
