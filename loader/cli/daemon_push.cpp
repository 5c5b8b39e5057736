#include "daemon_push.h"

#include "cli_common.h"
#include "ecpi/fleet/schema.h"

namespace ecpi::cli {

void add_daemon_push_options(CLI::App& app, DaemonPushArgs& args) {
    const char* group = "Fleet (docs/FLEET.md)";
    app.add_option("--push", args.url, "After each merge, send new samples to this ClickHouse URL")->group(group);
    app.add_option("--host", args.host, "This machine's name in the fleet (default: its hostname)")->group(group);
    app.add_option("--password-file", args.password_file, "ClickHouse password: first line of this file")->group(group);
    app.add_option("--push-backlog", args.backlog_mb, "Queue at most this many MB of unsent batches")
        ->default_str("256")
        ->group(group);
    app.add_option("--push-interval", args.interval_s, "Seconds between push attempts (default: the drain interval)")
        ->check(CLI::Range(0.1, 3600.0))
        ->group(group);
}

std::unique_ptr<fleet::PushLoop> start_daemon_push(const DaemonPushArgs& args, loader::RecordOptions& options,
                                                   const std::function<void(const std::string&)>& log) {
    if (args.url.empty()) {
        if (!args.host.empty() || !args.password_file.empty()) throw UsageError{"--host and --password-file go with --push"};
        return nullptr;
    }
    auto url = fleet::parse_clickhouse_url(args.url);
    if (!url.ok()) throw UsageError{"--push: " + url.error().message()};
    if (!url->params.empty()) throw UsageError{"--push takes no filters (?host=...): give the fleet name with --host"};
    auto client = unwrap(fleet::ClickHouseClient::connect(*url, unwrap(fleet::load_credentials(*url, args.password_file))));
    // The database must exist before the pusher opens its queue in it.
    unwrap(store::Database::open(options.database, store::Database::Mode::kCreate));
    fleet::PushOptions push;
    push.host = args.host;
    push.max_backlog_bytes = args.backlog_mb << 20;
    push.log = log;
    auto pusher = unwrap(fleet::Pusher::open(options.database, std::move(client), push));
    double interval = args.interval_s > 0 ? args.interval_s : options.drain_interval_s;
    auto loop = std::make_unique<fleet::PushLoop>(std::move(pusher), interval, log);
    fleet::PushLoop* raw = loop.get();
    options.merged = [raw] { raw->notify(); };
    log("pushing to " + url->display() + " after each merge" + (args.host.empty() ? "" : " as host " + args.host));
    return loop;
}

void stop_daemon_push(std::unique_ptr<fleet::PushLoop>& loop, const std::function<void(const std::string&)>& log) {
    if (!loop) return;
    fleet::PushProgress p = loop->stop(true);
    log("push: " + std::to_string(p.samples_sent) + " samples sent in " + std::to_string(p.batches_sent) + " batches, " +
        std::to_string(p.batches_pending) + " batches queued for the next start");
    loop.reset();
}

}  // namespace ecpi::cli
