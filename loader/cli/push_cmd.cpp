// ecpi push: send a profile database's new samples to ClickHouse (docs/FLEET.md).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/fleet/push.h"
#include "ecpi/fleet/schema.h"

namespace ecpi::cli {
namespace {

struct PushArgs {
    std::string database;
    std::string to;
    bool init = false;
    std::string cluster;
    std::string shard_database = "ecpi";
    std::string host;
    std::string password_file;
    std::uint64_t backlog_mb = 256;
    Format format = Format::kText;
};

void log_line(const std::string& line) { std::fprintf(stderr, "ecpi push: %s\n", line.c_str()); }

int run_push(const PushArgs& args) {
    if (args.database.empty() && !args.init) throw UsageError{"give a database to push, or --init to create the schema"};
    if (!args.cluster.empty() && !args.init) throw UsageError{"--cluster goes with --init"};
    auto url = fleet::parse_clickhouse_url(args.to);
    if (!url.ok()) throw UsageError{"--to: " + url.error().message()};
    if (!url->params.empty()) throw UsageError{"--to takes no filters (?host=...): give the fleet name with --host"};
    auto credentials = unwrap(fleet::load_credentials(*url, args.password_file));
    auto client = unwrap(fleet::ClickHouseClient::connect(*url, std::move(credentials)));
    nlohmann::json doc = {{"schema", "ecpi.push"}, {"version", 1}, {"target", url->display()}};
    if (args.init) {
        unwrap(fleet::init_schema(client, {args.cluster, args.shard_database}));
        doc["schema_version"] = fleet::kSchemaVersion;
        if (args.format == Format::kText)
            std::printf("ecpi schema version %u ready in %s%s\n", fleet::kSchemaVersion, url->display().c_str(),
                        args.cluster.empty() ? "" : (" (Distributed over cluster " + args.cluster + ")").c_str());
        if (args.database.empty()) {
            if (args.format == Format::kJson) std::cout << dump_document(doc) << "\n";
            return kExitOk;
        }
    }
    fleet::PushOptions options;
    options.host = args.host;
    options.max_backlog_bytes = args.backlog_mb << 20;
    options.log = log_line;
    auto pusher = unwrap(fleet::Pusher::open(args.database, std::move(client), options));
    fleet::PushProgress progress;
    unwrap(pusher.cut(progress));
    auto sent = pusher.send(progress);
    doc["database"] = args.database;
    doc["batches_cut"] = progress.batches_cut;
    doc["samples_cut"] = progress.samples_cut;
    doc["batches_sent"] = progress.batches_sent;
    doc["samples_sent"] = progress.samples_sent;
    doc["batches_already_there"] = progress.batches_already_there;
    doc["batches_pending"] = progress.batches_pending;
    doc["pending_bytes"] = progress.pending_bytes;
    doc["backlog_full"] = progress.backlog_full;
    doc["epochs_lost"] = progress.epochs_lost;
    if (args.format == Format::kJson) {
        std::cout << dump_document(doc) << "\n";
    } else {
        std::printf("%s: %llu samples sent to %s in %llu batches (%llu already there); %llu batches queued\n",
                    args.database.c_str(), static_cast<unsigned long long>(progress.samples_sent), url->display().c_str(),
                    static_cast<unsigned long long>(progress.batches_sent),
                    static_cast<unsigned long long>(progress.batches_already_there),
                    static_cast<unsigned long long>(progress.batches_pending));
    }
    if (!sent.ok())
        throw RuntimeError{sent.error().message() + " (" + std::to_string(progress.batches_pending) +
                           " batches stay queued in the database; run ecpi push again)"};
    return kExitOk;
}

void add_push_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<PushArgs>();
    auto* app = root.add_subcommand("push", "Send a database's new samples to ClickHouse (fleet-wide profiling)");
    app->footer(
        "Credentials: $ECPI_CLICKHOUSE_USER, and the password from --password-file, $ECPI_CLICKHOUSE_PASSWORD_FILE or "
        "$ECPI_CLICKHOUSE_PASSWORD (never in the URL). Each run sends only what the database gained since the last "
        "one; batches the server did not acknowledge stay queued in DB/push/ and are retried without double counting.");
    app->add_option("database", args->database, "Profile database directory");
    app->add_option("--to", args->to, "ClickHouse URL: http[s]://HOST:PORT[/DATABASE] (database default: ecpi)")->required();
    app->add_flag("--init", args->init, "Create the ecpi schema in ClickHouse if missing (idempotent)");
    app->add_option("--cluster", args->cluster,
                    "With --init: make Distributed tables over this remote_servers cluster instead of MergeTree");
    app->add_option("--shard-database", args->shard_database, "With --cluster: the shards' database")->default_str("ecpi");
    app->add_option("--host", args->host, "This machine's name in the fleet (default: the recorded hostname)");
    app->add_option("--password-file", args->password_file, "Read the ClickHouse password from this file's first line");
    app->add_option("--push-backlog", args->backlog_mb, "Queue at most this many MB of batches on disk")->default_str("256");
    add_format_option(*app, args->format);
    app->footer("\nExamples:\n  ecpi push --init --to http://127.0.0.1:8123\n  ecpi push /var/lib/ecpi --to http://ch.example:8123 --host web1\n");
    verbs.push_back({app, [args] { return run_push(*args); }});
}

const VerbRegistration kRegistration(75, add_push_verb);
}  // namespace
}  // namespace ecpi::cli
